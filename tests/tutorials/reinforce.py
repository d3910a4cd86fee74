# The REINFORCE example of PyTorch (examples/reinforcement_learning/reinforce.py) against a small
# deterministic environment in place of gym's CartPole: the Policy with Dropout and softmax,
# actions drawn from torch.distributions.Categorical, log_prob, discounted normalised returns,
# Adam, and the running reward (6 episodes).
# (``import torch.nn as nn`` and ``from torch.distributions import Categorical`` spelled as
# attributes: the test swaps ``import torch`` only.)
from collections import deque

import numpy as np
import torch

nn = torch.nn
F = torch.nn.functional
optim = torch.optim
Categorical = torch.distributions.Categorical


class ToyCartPole:
    """Four numbers drift with the action; every episode is cut at 8 steps (one program for
    finish_episode: each episode length would compile its own)."""

    def reset(self, seed=None):
        self.state = np.array([0.05, -0.02, 0.03, 0.01])
        self.steps = 0
        return self.state, {}

    def step(self, action):
        push = 0.1 if action == 1 else -0.1
        x, v, a, w = self.state
        self.state = np.array([x + v, v + push, a + w, w - 0.5 * push + 0.3 * a])
        self.steps += 1
        return self.state, 1.0 - abs(x), False, self.steps >= 8, {}


gamma = 0.99
env = ToyCartPole()
env.reset(seed=543)
torch.manual_seed(543)


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)

        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode():
    R = 0
    policy_loss = []
    returns = deque()
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.appendleft(R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return policy_loss.item()


running_reward = 10
for i_episode in range(1, 7):
    state, _ = env.reset()
    ep_reward = 0
    actions = []
    for t in range(1, 10000):  # Don't infinite loop while learning
        action = select_action(state)
        actions.append(action)
        state, reward, done, truncated, _ = env.step(action)
        policy.rewards.append(reward)
        ep_reward += reward
        if done or truncated:
            break

    running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
    loss = finish_episode()
    print('Episode {}\tLast reward: {:.2f}\tAverage reward: {:.2f}\tloss {:.4f}\t{}'.format(
        i_episode, ep_reward, running_reward, loss, actions))
