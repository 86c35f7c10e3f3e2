#!/usr/bin/env python3
"""Runs ultralytics/yolov5 v7.0 train.py (an unmodified copy) with or without yolocu's kernels, and
records per-iteration step times and losses.

    python python/yolocu_train/launch_train.py --yolov5 .data/yolov5 [--yolocu] --log run.json \
        -- --data coco128.yaml --cfg yolov5s.yaml --weights '' --epochs 5 --batch-size 16 ...

Everything after "--" goes to train.py. Step time = from the 'on_train_batch_start' callback to
'on_train_batch_end' (both after torch.cuda.synchronize(); train.py itself synchronises every
iteration when it prints the running loss), i.e. H2D copy, forward, loss, backward, optimizer and
EMA, without the wait for the data loader. The period between batch starts (including data waits)
is recorded too.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    argv = sys.argv[1:]
    train_args = []
    if "--" in argv:
        k = argv.index("--")
        argv, train_args = argv[:k], argv[k + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("--yolov5", required=True, help="root of an ultralytics/yolov5 v7.0 copy")
    ap.add_argument("--yolocu", action="store_true", help="switch the run onto yolocu kernels")
    ap.add_argument("--only", default="upsample,ciou,ema,sgd", help="which yolocu switches (with --yolocu)")
    ap.add_argument("--log", default=None, help="JSON file for step times and losses")
    args = ap.parse_args(argv)

    sys.path.insert(0, os.path.dirname(HERE))  # python/ -> import yolocu_train
    # compat.py by path: importing the yolocu_train package would build/load the extension, which
    # the baseline run must not do.
    import importlib.util
    spec = importlib.util.spec_from_file_location("yolocu_train_compat", os.path.join(HERE, "compat.py"))
    compat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compat)
    fixes = compat.apply()
    import torch

    root = os.path.abspath(args.yolov5)
    sys.path.insert(0, root)
    compat.patch_yolov5_checks()
    switched = []
    if args.yolocu:
        import yolocu_train
        from yolocu_train import yolov5 as yv5
        only = set(args.only.split(","))
        switched = yv5.enable(upsample="upsample" in only, ciou="ciou" in only, ema="ema" in only,
                              sgd="sgd" in only)
        print(f"yolocu_train: switched {switched} (library {yolocu_train.LIBRARY_PATH})")

    import utils.loss
    from utils.callbacks import Callbacks

    rec = {"t_start": [], "t_end": [], "ni": [], "loss_items": []}
    loss_items = []
    orig_call = utils.loss.ComputeLoss.__call__

    def recording_call(self, p, targets):
        loss, items = orig_call(self, p, targets)
        loss_items.append(items)
        return loss, items

    utils.loss.ComputeLoss.__call__ = recording_call

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)

    def on_start(*a, **k):
        sync()
        rec["t_start"].append(time.perf_counter())

    def on_end(model, ni, *a, **k):
        sync()
        rec["t_end"].append(time.perf_counter())
        rec["ni"].append(int(ni))

    cb = Callbacks()
    cb.register_action("on_train_batch_start", name="yolocu_timer", callback=on_start)
    cb.register_action("on_train_batch_end", name="yolocu_timer", callback=on_end)

    import train
    sys.argv = [os.path.join(root, "train.py")] + train_args
    opt = train.parse_opt()
    t0 = time.perf_counter()
    train.main(opt, callbacks=cb)
    total = time.perf_counter() - t0
    rec["loss_items"] = [x.float().cpu().tolist() for x in loss_items[:len(rec["ni"])]]
    rec.update(total_s=total, yolocu=args.yolocu, switched=switched, compat=fixes, train_args=train_args,
               torch=torch.__version__, device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
    if args.log:
        with open(args.log, "w") as f:
            json.dump(rec, f)
    print(f"launch_train: {len(rec['ni'])} iterations recorded, total {total:.1f} s")


if __name__ == "__main__":
    main()
