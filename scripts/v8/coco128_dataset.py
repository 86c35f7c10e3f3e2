"""coco128 as ultralytics' trainer and validator read it (scripts/v8/train_coco128.py, make_refs.py)."""
import json
import shutil
from pathlib import Path


def stage_coco128(coco, dst, names):
    """Stages coco128 under dst and returns its dataset file: the images linked (coco/images/train2017),
    the labels copied, since ultralytics writes its label cache beside the labels and the test material
    stays as it is. Train and val are the same 128 images; names: coco's class names by id."""
    coco, dst = Path(coco), Path(dst)
    shutil.rmtree(dst, ignore_errors=True)
    (dst / "images/train2017").mkdir(parents=True)
    for img in sorted((coco / "images/train2017").iterdir()):
        (dst / "images/train2017" / img.name).symlink_to(img.resolve())
    shutil.copytree(coco / "labels/train2017", dst / "labels/train2017")
    yaml = dst / "coco128.yaml"
    yaml.write_text(f"path: {dst.resolve()}\ntrain: images/train2017\nval: images/train2017\nnames:\n" +
                    "".join(f"  {k}: {json.dumps(names[k])}\n" for k in sorted(names)))
    return yaml
