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
        self._plan = None

    def _build_plan(self):
        params, group_idx = [], []
        for gi, g in enumerate(self.param_groups):
            for p in g["params"]:
                params.append(p)
                group_idx.append(gi)
        ok = (len(self.param_groups) <= 8 and
              all(p.is_cuda and p.dtype == torch.float32 and p.device == params[0].device for p in params))
        self._plan = (params, group_idx, ok, len(self.param_groups))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._plan is None or self._plan[3] != len(self.param_groups) or \
                sum(len(g["params"]) for g in self.param_groups) != len(self._plan[0]):
            self._build_plan()
        params, group_idx, ok, _ = self._plan
        grads = [p.grad for p in params]
        if not params:
            return loss
        if not ok or any(g is None or g.is_sparse or g.stride() != p.stride() for g, p in zip(grads, params)):
            self._reference_step()
            return loss
        groups = self.param_groups
        bufs, new = [], []
        for p, gi in zip(params, group_idx):
            if groups[gi]["momentum"] == 0:
                bufs.append(p.grad)  # a placeholder: never written when momentum == 0
                continue
            b = self.state[p].get("momentum_buffer")
            new.append(b is None)
            if b is None:
                b = self.state[p]["momentum_buffer"] = torch.empty_like(p)  # filled by the first step
            bufs.append(b)
        if any(new) and not all(new):
            # Some buffers exist, some do not (groups added later): the kernel has one first_step flag.
            for p, gi, is_new in zip([p for p, gi in zip(params, group_idx) if groups[gi]["momentum"] != 0],
                                     [gi for gi in group_idx if groups[gi]["momentum"] != 0], new):
                if is_new:
                    del self.state[p]["momentum_buffer"]
            self._reference_step()
            return loss
        first = bool(new) and all(new)
        F_.sgd_step_(params, grads, bufs, group_idx,
                     [float(g["lr"]) for g in groups], [float(g["momentum"]) for g in groups],
                     [float(g["dampening"]) for g in groups], [float(g["weight_decay"]) for g in groups],
                     [bool(g["nesterov"]) for g in groups], first)
        return loss

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
