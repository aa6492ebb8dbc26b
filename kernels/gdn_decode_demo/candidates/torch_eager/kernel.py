"""The demo operator in plain PyTorch (eager): a dozen small kernels per call.

A useful baseline to start from, and the host view's example of a launch-bound call: at small
batch the GPU spends most of the call waiting for the next launch (`fibtui ncu host`).
"""

import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    _, _, hq, K = q.shape
    hk = k.shape[2]
    hv = v.shape[2]
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    g = torch.exp(-torch.exp(A_log) * F.softplus(a.float() + dt_bias)).squeeze(1)
    beta = torch.sigmoid(b.float()).squeeze(1)
    qf = q.squeeze(1).float().repeat_interleave(hv // hq, dim=1)
    kf = k.squeeze(1).float().repeat_interleave(hv // hk, dim=1)
    s = state * g[:, :, None, None]
    old_v = torch.einsum("bhvk,bhk->bhv", s, kf)
    delta = beta[:, :, None] * (v.squeeze(1).float() - old_v)
    s = s + delta[:, :, :, None] * kf[:, :, None, :]
    new_state.copy_(s)
    output.copy_((scale * torch.einsum("bhvk,bhk->bhv", s, qf)).unsqueeze(1))
