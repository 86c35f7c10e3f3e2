"""yolocu.Tracker against ultralytics' own BYTETracker / BOTSORT on the reference sequences of
scripts/track/make_refs.sh (the ones the C++ parity tests use): the same rows [x1, y1, x2, y2,
track_id, score, cls, idx] at every frame, ids up to one relabelling per sequence, boxes within
1e-3 px. Skips visibly without the references (YOLOCU_REQUIRE_TRACK=1 makes that a failure)."""
import os

import numpy as np
import pytest

import yolocu

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REFS = os.environ.get("YOLOCU_TRACK_DIR") or os.path.join(REPO, ".data", "track", "refs")


def refs_dir():
    if not os.path.exists(os.path.join(REFS, "COMPLETE")):
        msg = f"no tracker references in {REFS} (scripts/track/make_refs.sh makes them)"
        if os.environ.get("YOLOCU_REQUIRE_TRACK", "0") not in ("", "0"):
            pytest.fail("YOLOCU_REQUIRE_TRACK: " + msg)
        pytest.skip(msg)
    return REFS


def read_dets(path):
    """Per frame: (N x 6 array x1 y1 x2 y2 conf cls, warp or None)."""
    frames = []
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        head = lines[i].split()
        assert head[0] == "frame" and int(head[1]) == len(frames) + 1, f"{path}: bad frame line {lines[i]!r}"
        n = int(head[2])
        warp = [float(v) for v in head[3:9]] if len(head) >= 9 else None
        dets = np.array([[float(v) for v in lines[i + 1 + k].split()] for k in range(n)], np.float32).reshape(n, 6)
        frames.append((dets, warp))
        i += 1 + n
    return frames


def read_outputs(path, n_frames):
    out = [np.zeros((0, 8), np.float32) for _ in range(n_frames)]
    tokens = open(path).read().split()
    i = 0
    while i < len(tokens):
        assert tokens[i] == "frame", f"{path}: bad frame line"
        f, n = int(tokens[i + 1]), int(tokens[i + 2])
        out[f - 1] = np.array(tokens[i + 3:i + 3 + 8 * n], np.float64).astype(np.float32).reshape(n, 8)
        i += 3 + 8 * n
    return out


def sequences(listing="sequences.txt"):
    with open(os.path.join(refs_dir(), listing)) as f:
        return [line.split()[0] for line in f if line.strip()]


def compare(name, got_frames, want_frames):
    """Every frame's rows equal; returns the number of (frame, box) rows compared."""
    relabel, rows = {}, 0
    for f, (got, want) in enumerate(zip(got_frames, want_frames)):
        where = f"{name} frame {f + 1}"
        assert got.shape == want.shape, f"{where}: {len(got)} rows, ultralytics {len(want)}"
        np.testing.assert_array_equal(got[:, 7], want[:, 7], err_msg=f"{where}: detection index")
        np.testing.assert_allclose(got[:, :4], want[:, :4], rtol=0, atol=1e-3, err_msg=f"{where}: box")
        np.testing.assert_array_equal(got[:, 5:7], want[:, 5:7], err_msg=f"{where}: score, class")
        for ours, theirs in zip(got[:, 4].astype(int), want[:, 4].astype(int)):
            assert relabel.setdefault(ours, theirs) == theirs, f"{where}: our id {ours} was ultralytics' {relabel[ours]}, now {theirs}"
        rows += len(want)
    return rows


@pytest.mark.parametrize("tracker", ["bytetrack", "botsort", "bytetrack_tuned"])
def test_tracker_equals_ultralytics(tracker):
    rows = 0
    for name in sequences():
        frames = read_dets(os.path.join(REFS, name + ".dets"))
        want = read_outputs(os.path.join(REFS, f"{name}.{tracker}.out"), len(frames))
        t = yolocu.Tracker(os.path.join(REFS, tracker + ".yaml"), frame_rate=30)
        got = [t.update(d[:, :4], d[:, 4], d[:, 5], warp=warp) for d, warp in frames]
        assert all(g.dtype == np.float32 and g.shape[1:] == (8,) for g in got)
        rows += compare(f"{tracker} {name}", got, want)
    assert rows > 20000


def test_botsort_sparse_opt_flow_from_frames():
    """botsort.yaml as shipped (gmc_method sparseOptFlow): the warp estimated from the rendered frames
    with OpenCV inside yolocu.Tracker, as ultralytics' BOTSORT does."""
    refs = refs_dir()
    cv2 = pytest.importorskip("cv2", reason="OpenCV (cv2) is not installed: BoT-SORT's sparseOptFlow from frames not tested")
    rows = 0
    for name in sequences("video_sequences.txt"):
        frames = read_dets(os.path.join(refs, name + ".dets"))
        want = read_outputs(os.path.join(refs, f"{name}.botsort_sof.out"), len(frames))
        t = yolocu.Tracker("botsort.yaml")
        got = []
        for f, (d, _) in enumerate(frames):
            img = cv2.imread(os.path.join(refs, name, f"{f + 1:04d}.png"), cv2.IMREAD_COLOR)
            got.append(t.update(d[:, :4], d[:, 4], d[:, 5], img=img))
        rows += compare(f"botsort_sof {name}", got, want)
    assert rows > 1000


def test_names_dicts_and_bad_input():
    refs = refs_dir()
    t = yolocu.Tracker({"tracker_type": "bytetrack", "track_buffer": 8, "fuse_score": False, "match_thresh": 0.6,
                        "track_high_thresh": 0.5, "new_track_thresh": 0.6})
    frames = read_dets(os.path.join(refs, "crossing_0.dets"))
    want = read_outputs(os.path.join(refs, "crossing_0.bytetrack_tuned.out"), len(frames))
    tuned = [line.split("#")[0].strip() for line in open(os.path.join(refs, "bytetrack_tuned.yaml"))]
    assert {"track_buffer: 8", "fuse_score: False", "match_thresh: 0.6"} <= set(tuned), "the tuned file changed"
    compare("dict crossing_0", [t.update(d[:, :4], d[:, 4], d[:, 5]) for d, _ in frames], want)
    assert t.frame_id == len(frames)
    t.reset()
    assert t.frame_id == 0
    assert yolocu.Tracker("botsort.yaml").tracker_type == "botsort"
    with pytest.raises(FileNotFoundError, match="not one of the built-in"):
        yolocu.Tracker("nosuch.yaml")
    with pytest.raises(ValueError, match="unknown key 'foo'"):
        yolocu.Tracker({"tracker_type": "bytetrack", "foo": 1})
    with pytest.raises(ValueError, match="with_reid"):
        yolocu.Tracker({"tracker_type": "botsort", "with_reid": True})
    with pytest.raises(ValueError, match="gmc_method ecc is not built"):
        yolocu.Tracker({"tracker_type": "botsort", "gmc_method": "ecc"})
    t = yolocu.Tracker("bytetrack.yaml")
    with pytest.raises(ValueError, match="N x 4"):
        t.update(np.zeros((3, 5)), np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="3 boxes but 2 scores"):
        t.update(np.zeros((3, 4)), np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="non-finite|finite"):
        t.update(np.array([[0, 0, np.nan, 5]]), [0.9], [0])
    with pytest.raises(ValueError, match="needs img"):
        yolocu.Tracker("botsort.yaml").update(np.zeros((0, 4)), [], [])
    assert t.update(np.zeros((0, 4)), [], []).shape == (0, 8)
    with pytest.raises(TypeError, match="give the scores and classes"):
        t.update(np.zeros((0, 4)))


def test_boxes_object_as_ultralytics_passes_it():
    """update(boxes) with .xyxy, .conf, .cls (ultralytics' Boxes) gives ultralytics' rows too."""
    from types import SimpleNamespace
    frames = read_dets(os.path.join(refs_dir(), "crossing_1.dets"))
    want = read_outputs(os.path.join(REFS, "crossing_1.bytetrack.out"), len(frames))
    t = yolocu.Tracker("bytetrack.yaml")
    got = [t.update(SimpleNamespace(xyxy=d[:, :4], conf=d[:, 4], cls=d[:, 5])) for d, _ in frames]
    compare("boxes object crossing_1", got, want)


# ---- Detector.track: detection + tracking, ultralytics' model.track() ----

@pytest.fixture(scope="module")
def track_det():
    from conftest import data_path
    return yolocu.Detector(data_path("models", "yolov5n.onnx"), device="cpu", precision="fp32")


def test_detector_track_follows_still_objects_with_stable_ids(track_det):
    """The same image as 4 frames: every box of a score >= new_track_thresh (0.25 in bytetrack.yaml) is
    tracked from frame 1 (ultralytics activates first-frame tracks at once) with ids 1..K and keeps its
    id; the boxes of 0.1..0.25 start no track; boxes.data is ultralytics' N x 7 layout."""
    from conftest import data_path
    bus = data_path("images", "bus.jpg")
    res = track_det.track([bus] * 4)
    dets = track_det.predict(bus, conf=0.1)  # track's default conf: 0.1, as ultralytics' track
    assert len(res) == 4
    k = len(res[0].boxes)
    strong = dets.boxes[dets.boxes.conf >= 0.25]
    assert len(strong) < len(dets.boxes)  # the low-score boxes the default conf 0.1 lets through
    assert k == len(strong) > 0
    assert sorted(res[0].boxes.id.astype(int).tolist()) == list(range(1, k + 1))
    for r in res:
        assert r.boxes.is_track and r.boxes.data.shape == (k, 7)
        assert np.array_equal(r.boxes.data[:, 4], r.boxes.id)
        order = np.argsort(r.boxes.id)
        first = res[0].boxes.xyxy[np.argsort(res[0].boxes.id)]
        assert np.abs(r.boxes.xyxy[order] - first).max() < 0.5  # still objects: the Kalman box stays put
        assert np.array_equal(np.sort(r.boxes.cls), np.sort(strong.cls))
    # the tracked boxes of frame 1 are the detections (ids aside)
    assert np.abs(np.sort(res[0].boxes.xyxy, axis=0) - np.sort(strong.xyxy, axis=0)).max() < 1e-3


def test_detector_track_persist_and_stream(track_det):
    from conftest import data_path
    bus = data_path("images", "bus.jpg")
    zidane = data_path("images", "zidane.jpg")
    first = track_det.track([bus, bus])
    again = track_det.track([bus])[0]  # a new tracker: ids from 1 again
    assert sorted(again.boxes.id.astype(int).tolist()) == sorted(first[0].boxes.id.astype(int).tolist())
    k = len(first[0].boxes)
    fresh = track_det.track(zidane)  # one image in, one Results out; a new tracker: ids 1..
    kz = len(fresh.boxes)
    assert kz > 0 and sorted(fresh.boxes.id.astype(int).tolist()) == list(range(1, kz + 1))
    track_det.track([bus])
    # persist: the bus frame's tracker goes on; zidane's objects are new there, so (as in ultralytics)
    # their tracks are confirmed on their second frame, with ids after the bus frame's
    cont = track_det.track([zidane, zidane], persist=True)
    assert len(cont[0].boxes) < kz
    assert len(cont[1].boxes) > 0 and int(max(cont[1].boxes.id)) > k
    streamed = list(track_det.track([bus] * 3, stream=True))
    listed = track_det.track([bus] * 3)
    assert len(streamed) == 3
    for a, b in zip(streamed, listed):
        assert np.array_equal(a.boxes.data, b.boxes.data)
