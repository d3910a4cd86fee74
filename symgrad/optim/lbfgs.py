"""``torch.optim.LBFGS``: limited-memory BFGS over all parameters as one flat vector, stepped with
a closure that recomputes the loss.

Each iteration branches on numbers the tensors hold (the curvature ``y.s``, the slope, the
gradient's largest entry), so the optimizer reads them as PyTorch's does, in PyTorch's order of
operations: the parameters after a step are PyTorch's to float32 rounding, and the loop takes the
same branches.  Its state (the history, the last direction and step) lives under the first
parameter, as PyTorch keeps it, so ``state_dict`` saves it."""
from __future__ import annotations

from symgrad import creation
from symgrad.grad_mode import enable_grad, no_grad
from symgrad.ops.shape import cat
from symgrad.optim.optimizer import Optimizer
from symgrad.optim.strong_wolfe import held, strong_wolfe
from symgrad.tensor import Tensor


def check_lr(lr) -> None:
    """PyTorch's checks on a learning rate, which may be a one-element tensor."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def scalar(value):
    """A one-element tensor hyperparameter as a 0-d tensor (PyTorch's ``_to_scalar``)."""
    return value.squeeze() if isinstance(value, Tensor) and value.dim() != 0 else value


class LBFGS(Optimizer):
    def __init__(self, params, lr=1, max_iter: int = 20, max_eval=None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100, line_search_fn=None):
        check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self) -> Tensor:
        """The gradients as one vector (zeros for a parameter without one)."""
        return cat([creation.zeros(p.numel(), dtype=p.dtype) if p.grad is None else p.grad.reshape(-1)
                    for p in self._params], 0)

    def _move(self, step, direction) -> None:
        """Every parameter takes ``step`` times its slice of the flat ``direction`` (``step`` read as
        a number, as PyTorch's ``alpha`` is)."""
        offset = 0
        for p in self._params:
            p.add_(direction[offset:offset + p.numel()].view_as(p), alpha=float(held(step)))
            offset += p.numel()

    def _evaluate_along(self, closure, saved, step, direction):
        """The loss and flat gradient at ``step`` along ``direction``; the parameters are put back."""
        self._move(step, direction)
        loss = float(closure())
        flat = self._flat_grad()
        for p, value in zip(self._params, saved, strict=True):
            p.copy_(value)
        return loss, flat

    @no_grad()
    def step(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = scalar(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        closure = enable_grad()(closure)
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        first_loss = closure()
        loss, evals = float(first_loss), 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if flat_grad.abs().max() <= tolerance_grad:
            return first_loss
        memory = {key: state.get(key) for key in ("d", "t", "old_dirs", "old_stps", "ro", "H_diag",
                                                  "prev_flat_grad", "prev_loss")}
        iterations = 0
        while iterations < max_iter:
            iterations += 1
            state["n_iter"] += 1
            d = memory["d"] = self._direction(state, memory, flat_grad, group["history_size"])
            if memory["prev_flat_grad"] is None:
                memory["prev_flat_grad"] = flat_grad.clone()
            else:
                memory["prev_flat_grad"].copy_(flat_grad)
            memory["prev_loss"] = loss
            t = memory["t"] = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:
                break
            loss, flat_grad, t, taken = self._advance_along(closure, group, d, t, loss, flat_grad, gtd,
                                                            max_eval - evals, iterations == max_iter)
            optimal = taken and flat_grad.abs().max() <= tolerance_grad
            evals += taken
            state["func_evals"] += taken
            memory["t"] = t
            if iterations == max_iter or evals >= max_eval or optimal:
                break
            if d.mul(t).abs().max() <= tolerance_change or abs(loss - memory["prev_loss"]) < tolerance_change:
                break
        state.update(memory)
        return first_loss

    def _advance_along(self, closure, group, d, t, loss, flat_grad, gtd, evals_left, last):
        """The parameters move along ``d``, by the step the line search finds or by ``t``; the new
        loss and flat gradient (the old ones after a fixed last step, which PyTorch skips
        evaluating), the step, and the evaluations it took."""
        if group["line_search_fn"] is None:
            self._move(t, d)
            if last:
                return loss, flat_grad, t, 0
            return float(closure()), self._flat_grad(), t, 1
        if group["line_search_fn"] != "strong_wolfe":
            raise RuntimeError("only 'strong_wolfe' is supported")
        saved = [p.clone() for p in self._params]
        loss, flat_grad, t, taken = strong_wolfe(
            lambda x, step, direction: self._evaluate_along(closure, x, step, direction),
            saved, t, d, loss, flat_grad, gtd, max_ls=evals_left)
        self._move(t, d)
        return loss, flat_grad, t, taken

    def _direction(self, state, memory, flat_grad, history_size) -> Tensor:
        """The next search direction: minus the gradient at first, then minus the gradient times
        the inverse Hessian the history estimates (the two-loop recursion), after adding the last
        step to the history if it kept the curvature positive."""
        if state["n_iter"] == 1:
            memory.update(old_dirs=[], old_stps=[], ro=[], H_diag=1)
            return flat_grad.neg()
        dirs, steps, ro = memory["old_dirs"], memory["old_stps"], memory["ro"]
        y = flat_grad.sub(memory["prev_flat_grad"])
        s = memory["d"].mul(memory["t"])
        ys = y.dot(s)
        if ys > 1e-10:
            if len(dirs) == history_size:
                del dirs[0], steps[0], ro[0]
            dirs.append(y)
            steps.append(s)
            ro.append(1.0 / ys)
            memory["H_diag"] = ys / y.dot(y)
        al = state.setdefault("al", [None] * history_size)
        q = flat_grad.neg()
        for i in reversed(range(len(dirs))):
            al[i] = steps[i].dot(q) * ro[i]
            q.add_(dirs[i], alpha=-held(al[i]))
        r = q.mul(memory["H_diag"])
        for i in range(len(dirs)):
            r.add_(steps[i], alpha=held(al[i]) - held(dirs[i].dot(r) * ro[i]))
        return r
