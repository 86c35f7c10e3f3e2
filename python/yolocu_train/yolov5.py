"""Switches an ultralytics/yolov5 (v7.0) training run onto yolocu's kernels, without editing its files.

Call enable() after yolov5's root is on sys.path and *before* `import train` (train.py binds
smart_optimizer by name at import time). It patches, in yolov5's own modules:

* models.yolo.Model.__init__   -> after building, nn.Upsample(2, 'nearest') layers become Upsample2x
* utils.loss.ComputeLoss.__call__ -> same loss, but the CIoU of all levels is one fused op
                                     (one forward and one backward launch per iteration)
* utils.torch_utils.ModelEMA.update -> one launch per update over cached state tensors
* utils.torch_utils.smart_optimizer -> for 'SGD', FusedSGD with the same three parameter groups

Each switch can be turned off (enable(ema=False), ...). The patched loss keeps every other term,
the order of the per-level sums and the objectness targets of the original.
"""
import torch

from . import functional as F_
from .modules import FusedModelEMA, FusedSGD, Upsample2x

CIOU_EPS = 1e-7  # bbox_iou's default, used by ComputeLoss


def _fused_loss_call(self, p, targets):
    """ComputeLoss.__call__ with the three levels' CIoU in one fused op."""
    dev = self.device
    lcls = torch.zeros(1, device=dev)
    lbox = torch.zeros(1, device=dev)
    lobj = torch.zeros(1, device=dev)
    tcls, tbox, indices, anchors = self.build_targets(p, targets)

    # Pass 1: decoded predicted boxes of every level that has targets.
    picked, pboxes, tboxes = {}, [], []
    for i, pi in enumerate(p):
        b, a, gj, gi = indices[i]
        if b.shape[0]:
            pxy, pwh, _, pcls = pi[b, a, gj, gi].split((2, 2, 1, self.nc), 1)
            pxy = pxy.sigmoid() * 2 - 0.5
            pwh = (pwh.sigmoid() * 2) ** 2 * anchors[i]
            pbox = torch.cat((pxy, pwh), 1)
            picked[i] = (len(pboxes), pcls)
            pboxes.append(pbox)
            tboxes.append(tbox[i].to(pbox.dtype))
    ious = F_.ciou(pboxes, tboxes, CIOU_EPS) if pboxes else []

    # Pass 2: the per-level terms, in the original order.
    for i, pi in enumerate(p):
        b, a, gj, gi = indices[i]
        tobj = torch.zeros(pi.shape[:4], dtype=pi.dtype, device=dev)
        n = b.shape[0]
        if n:
            k, pcls = picked[i]
            iou = ious[k]
            lbox += (1.0 - iou).mean()
            iou = iou.detach().clamp(0).type(tobj.dtype)
            if self.sort_obj_iou:
                j = iou.argsort()
                b, a, gj, gi, iou = b[j], a[j], gj[j], gi[j], iou[j]
            if self.gr < 1:
                iou = (1.0 - self.gr) + self.gr * iou
            tobj[b, a, gj, gi] = iou
            if self.nc > 1:
                t = torch.full_like(pcls, self.cn, device=dev)
                t[range(n), tcls[i]] = self.cp
                lcls += self.BCEcls(pcls, t)
        obji = self.BCEobj(pi[..., 4], tobj)
        lobj += obji * self.balance[i]
        if self.autobalance:
            self.balance[i] = self.balance[i] * 0.9999 + 0.0001 / obji.detach().item()

    if self.autobalance:
        self.balance = [x / self.balance[self.ssi] for x in self.balance]
    lbox *= self.hyp['box']
    lobj *= self.hyp['obj']
    lcls *= self.hyp['cls']
    bs = p[0].shape[0]
    return (lbox + lobj + lcls) * bs, torch.cat((lbox, lobj, lcls)).detach()


def _unwrap(model):
    return model.module if isinstance(model, (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)) \
        else model


def enable(upsample=True, ciou=True, ema=True, sgd=True, verbose=True):
    """Patches yolov5's modules (they must be importable: yolov5's root on sys.path). Returns what was switched."""
    import models.yolo
    import utils.loss
    import utils.torch_utils

    switched = []
    if upsample and not getattr(models.yolo.Model, "_yolocu", False):
        orig_init = models.yolo.Model.__init__

        def init(self, *args, **kwargs):
            orig_init(self, *args, **kwargs)
            n = Upsample2x.convert(self)
            if verbose:
                print(f"yolocu_train: {n} nn.Upsample layers -> Upsample2x")

        models.yolo.Model.__init__ = init
        models.yolo.Model._yolocu = True
        switched.append("upsample")
    if ciou:
        utils.loss.ComputeLoss.__call__ = _fused_loss_call
        switched.append("ciou")
    if ema:
        def update(self, model):
            self.updates += 1
            d = self.decay(self.updates)
            cache = getattr(self, "_yolocu_ema", None)
            if cache is None:
                cache = self._yolocu_ema = FusedModelEMA(self.ema, _unwrap(model))
                if verbose:
                    print(f"yolocu_train: EMA over {len(cache.ema)} tensors, fused={cache.fused}")
            cache.update(d)

        utils.torch_utils.ModelEMA.update = update
        switched.append("ema")
    if sgd:
        orig_smart = utils.torch_utils.smart_optimizer

        def smart_optimizer(model, name='Adam', lr=0.001, momentum=0.9, decay=1e-5):
            opt = orig_smart(model, name, lr, momentum, decay)
            if name != 'SGD':
                return opt
            groups = [{k: g[k] for k in ('params', 'lr', 'momentum', 'dampening', 'weight_decay', 'nesterov')}
                      for g in opt.param_groups]
            if verbose:
                print(f"yolocu_train: SGD -> FusedSGD with {len(groups)} groups")
            return FusedSGD(groups, lr=lr, momentum=momentum, nesterov=True)

        utils.torch_utils.smart_optimizer = smart_optimizer
        switched.append("sgd")
    return switched
