"""docs/api.md lists the API symgrad offers: every name of PyTorch's that ``symgrad``,
``symgrad.nn``, ``symgrad.nn.functional``, ``symgrad.optim``, ``symgrad.autograd`` and ``Tensor``
also have appears there (in backquotes), so the page stays true as ops are added."""
import inspect
from pathlib import Path

import symgrad

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()


def _shared(ours, theirs) -> set:
    """Public names both namespaces have (symgrad's helpers are not PyTorch's API)."""
    return {name for name in dir(ours) if not name.startswith("_") and hasattr(theirs, name)
            and not inspect.ismodule(getattr(ours, name))}


def test_every_exported_name_is_in_the_api_page(torch):
    listed = {token.strip("`") for token in PAGE.split() if token.startswith("`")}
    listed |= {part.strip("`(),.") for token in PAGE.split() for part in token.split("`") if part}
    missing = {}
    for label, names in (("symgrad", _shared(symgrad, torch)), ("nn", _shared(symgrad.nn, torch.nn)),
                         ("nn.functional", _shared(symgrad.nn.functional, torch.nn.functional)),
                         ("optim", _shared(symgrad.optim, torch.optim)),
                         ("autograd", _shared(symgrad.autograd, torch.autograd)),
                         ("Tensor", _shared(symgrad.Tensor, torch.Tensor))):
        absent = sorted(n for n in names if n not in listed)
        if absent:
            missing[label] = absent
    assert not missing, f"docs/api.md does not list: {missing}"
