"""Drop-in modules: Upsample2x (nn.Upsample), FusedModelEMA (ModelEMA.update), FusedSGD (torch.optim.SGD)."""
import torch
import torch.nn as nn

from . import functional as F_


def _is_nearest_2x(m):
    if m.mode != "nearest" or m.size is not None:
        return False
    s = m.scale_factor
    if isinstance(s, (tuple, list)):
        return len(s) == 2 and all(float(v) == 2.0 for v in s)
    return s is not None and float(s) == 2.0


class Upsample2x(nn.Upsample):
    """nn.Upsample that runs yolocu's kernel for 4-D CUDA inputs when scale_factor=2, mode='nearest'.

    Anything else falls back to nn.Upsample. Convert an existing module in place (keeps YOLOv5's
    per-layer attributes such as .f and .i) with Upsample2x.convert(module).
    """

    def forward(self, x):
        if x.is_cuda and x.dim() == 4 and _is_nearest_2x(self):
            return F_.upsample_nearest2x(x)
        return super().forward(x)

    @staticmethod
    def convert(root):
        """Switches every nn.Upsample(scale_factor=2, mode='nearest') under root to Upsample2x; returns the count."""
        n = 0
        for m in root.modules():
            if type(m) is nn.Upsample and _is_nearest_2x(m):
                m.__class__ = Upsample2x
                n += 1
        return n


class FusedModelEMA:
    """The model-EMA update of ultralytics' ModelEMA in one kernel launch per step.

    Caches the floating-point (ema, model) state tensors once (they keep their storage across steps,
    updates are in place); per step only d is computed. Arithmetic as ModelEMA: v = v*d + (1-d)*m.
    Falls back to the per-tensor loop if a tensor is not float32 on a CUDA device.
    """

    def __init__(self, ema_module, model):
        esd = ema_module.state_dict()
        msd = model.state_dict()
        self.ema, self.model = [], []
        for k, v in esd.items():
            if v.dtype.is_floating_point:
                m = msd[k].detach()
                self.ema.append(v)
                self.model.append(m)
        self.fused = all(e.is_cuda and e.dtype == torch.float32 and m.dtype == torch.float32 and
                         e.device == m.device and e.stride() == m.stride() and e.shape == m.shape
                         for e, m in zip(self.ema, self.model))

    @torch.no_grad()
    def update(self, d):
        if self.fused:
            F_.ema_update_(self.ema, self.model, d)
        else:
            for e, m in zip(self.ema, self.model):
                e *= d
                e += (1 - d) * m


class FusedSGD(torch.optim.Optimizer):
    """torch.optim.SGD (momentum, dampening, Nesterov, weight decay; per-group values read every step)
    in one kernel launch per step for float32 CUDA parameters.

    Momentum buffers live in state[p]['momentum_buffer'] as in torch.optim.SGD, so state_dict() and
    load_state_dict() are compatible. Parameters without a gradient are skipped like torch does (via
    the reference per-tensor path for that step). p.grad is only read.
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))
        self._plan = None  # (key, params, group index per tensor, fused ok, cached buffer list)

    def _plan_key(self):
        return tuple((len(g["params"]), g["momentum"] != 0) for g in self.param_groups)

    def _build_plan(self, key):
        params, group_idx = [], []
        for gi, g in enumerate(self.param_groups):
            for p in g["params"]:
                params.append(p)
                group_idx.append(gi)
        ok = bool(params) and len(self.param_groups) <= 8 and all(
            p.is_cuda and p.dtype == torch.float32 and p.device == params[0].device and
            (p.is_contiguous() or p.is_contiguous(memory_format=torch.channels_last)) for p in params)
        self._plan = [key, params, group_idx, ok, None]

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        key = self._plan_key()
        if self._plan is None or self._plan[0] != key:
            self._build_plan(key)
        _, params, group_idx, ok, bufs = self._plan
        grads = [p.grad for p in params]
        if not ok or any(g is None for g in grads):
            self._reference_step()
            return loss
        groups = self.param_groups
        first = False
        if bufs is None:
            # Checked once per plan: gradients laid out like their parameters (autograd's contract).
            if any(g.is_sparse or g.stride() != p.stride() for g, p in zip(grads, params)):
                self._plan[3] = False
                self._reference_step()
                return loss
            have = [self.state[p].get("momentum_buffer") is not None
                    for p, gi in zip(params, group_idx) if groups[gi]["momentum"] != 0]
            if any(have) and not all(have):
                self._reference_step()  # mixed: some buffers exist (e.g. a group added later)
                return loss
            first = not all(have) if have else False
            bufs = []
            for p, gi in zip(params, group_idx):
                if groups[gi]["momentum"] == 0:
                    bufs.append(None)  # placeholder, replaced by the gradient below; never written
                    continue
                st = self.state[p]
                if st.get("momentum_buffer") is None:
                    st["momentum_buffer"] = torch.empty_like(p)  # written by the first step
                bufs.append(st["momentum_buffer"])
            if all(b is not None for b in bufs):
                self._plan[4] = bufs
        step_bufs = bufs if all(b is not None for b in bufs) else \
            [b if b is not None else g for b, g in zip(bufs, grads)]
        F_.sgd_step_(params, grads, step_bufs, group_idx,
                     [float(g["lr"]) for g in groups], [float(g["momentum"]) for g in groups],
                     [float(g["dampening"]) for g in groups], [float(g["weight_decay"]) for g in groups],
                     [bool(g["nesterov"]) for g in groups], first)
        return loss

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._plan = None  # buffers were replaced

    def _reference_step(self):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                d_p = p.grad
                if g["weight_decay"] != 0:
                    d_p = d_p.add(p, alpha=g["weight_decay"])
                if g["momentum"] != 0:
                    st = self.state[p]
                    b = st.get("momentum_buffer")
                    if b is None:
                        b = st["momentum_buffer"] = torch.clone(d_p).detach()
                    else:
                        b.mul_(g["momentum"]).add_(d_p, alpha=1 - g["dampening"])
                    d_p = d_p.add(b, alpha=g["momentum"]) if g["nesterov"] else b
                p.add_(d_p, alpha=-g["lr"])
