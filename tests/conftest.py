from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Tests never reach a model hub: fail fast instead of waiting on the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
# content-hash cache (judgetrain.identity): the session's own, never the user's ~/.cache
os.environ.setdefault("JUDGETRAIN_CACHE", tempfile.mkdtemp(prefix="judgetrain-cache-"))


@pytest.fixture(autouse=True)
def _free_writer_locks():
    """A command run in-process keeps its output folder's writer lock until its process ends
    (judgetrain.writer); the test process lets go of them after each test, so a later command in
    another process may write those folders again."""
    yield
    from judgetrain import writer

    writer.release_all()


# a process that holds a folder's writer lock until the test lets it go (stdin closed)
_HOLDER = ("import sys\nfrom judgetrain import writer\nwriter.hold(sys.argv[1])\nprint('held', flush=True)\n"
           "sys.stdin.read()\n")


@pytest.fixture
def writer_lock():
    """Two real processes on one output folder, synchronised without sleeps:
    ``writer_lock.hold(folder)`` starts a process that takes ``folder``'s writer lock through
    :func:`judgetrain.writer.hold` and returns once it holds it (its pid is named in the other
    process's refusal); ``writer_lock.release()`` ends it; ``writer_lock.waiting(argv)`` starts a
    command with ``--wait`` and returns once it says it waits (stderr read line by line), with the
    lines it printed before."""
    import subprocess
    import sys

    class Lock:
        def __init__(self):
            self.holder: subprocess.Popen | None = None
            self.started: list[subprocess.Popen] = []

        def hold(self, folder) -> subprocess.Popen:
            self.holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(folder)], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, text=True)
            self.started.append(self.holder)
            assert self.holder.stdout.readline().strip() == "held"
            return self.holder

        def release(self) -> None:
            self.holder.stdin.close()
            assert self.holder.wait(timeout=60) == 0

        def waiting(self, argv: list[str], **kw) -> tuple[subprocess.Popen, list[str]]:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
            self.started.append(proc)
            lines = []
            for line in proc.stderr:
                lines.append(line)
                if "waiting (--wait)" in line:
                    return proc, lines
            raise AssertionError(f"{argv} never waited; it printed:\n{''.join(lines)}{proc.stdout.read()}")

    lock = Lock()
    yield lock
    for proc in lock.started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# every family the registry has, and the InternVL3.5 variant (a Qwen3 decoder)
TINY_FAMILIES = ("qwen3-vl", "qwen2.5-vl", "llava-onevision", "internvl", "internvl3.5", "gemma-4")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """``tiny_model(name)``: the folder of a tiny random checkpoint of ``name`` (seed 0), built
    on first use and shared by the session's tests, which only read it."""
    from judgetrain.models.tiny import build_tiny

    root = tmp_path_factory.mktemp("tiny-models")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = build_tiny(name, root / name, seed=0)
        return built[name]

    return get


@pytest.fixture(scope="session")
def tiny_root(tiny_model) -> Path:
    """The folder holding every tiny checkpoint of :data:`TINY_FAMILIES`, one sub-folder each."""
    folders = [tiny_model(name) for name in TINY_FAMILIES]
    return folders[0].parent


@pytest.fixture(scope="session")
def synthetic_manifest(tmp_path_factory):
    """Twelve synthetic physics clips (a quarter long enough for the 9–16 set)."""
    from judgetrain.data_builders.synthetic import write_physics_videos

    return write_physics_videos(tmp_path_factory.mktemp("clips"), 12, seed=3, long_fraction=0.25, progress=False)


@pytest.fixture(scope="session")
def timecatch_build(tmp_path_factory, synthetic_manifest):
    """A TimeCatch build over the synthetic clips, random LPIPS backbone (offline)."""
    from judgetrain.data_builders import timecatch

    out = tmp_path_factory.mktemp("tc") / "ds"
    cfg = timecatch.TimeCatchConfig(out=out, videos=synthetic_manifest, seed=7, lpips_random_backbone=True,
                                    prompts=("A", "B"), progress=False)
    info = timecatch.build(cfg)
    return out, info, cfg


@pytest.fixture(scope="session")
def prism_build(tmp_path_factory):
    """A PRISM build of four synthetic procedures, layout P0, everything in its test split: the
    judge runs of the thinking-prefill, two-node and run-browser tests (which only read it)."""
    from judgetrain.data_builders import prism

    out = tmp_path_factory.mktemp("prism") / "prism"
    prism.build(prism.PrismConfig(out=out, synthetic=4, layouts=("P0",), synthetic_size=64, splits={"test": 1.0},
                                  progress=False))
    return out


@pytest.fixture(scope="session")
def tiny_prism_recipe(tmp_path_factory, tiny_model):
    """``tiny_prism_recipe(folder)``: the tiny PRISM pairwise recipe written as ``folder/recipe.yaml``
    (the caller's file, which it may edit), pointed at this session's qwen3-vl model and at one
    12-item PRISM set built once for the session."""
    import yaml

    from judgetrain.data_builders import prism

    data = tmp_path_factory.mktemp("prism-recipe") / "prism"
    prism.build(prism.PrismConfig(out=data, synthetic=12, seed=3, layouts=("P0",), modes=("pairwise",), synthetic_size=64,
                                  progress=False))
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "tiny" / "qwen3vl-prism-pairwise-lora.yaml"

    def write(folder: Path) -> Path:
        doc = yaml.safe_load(recipe.read_text())
        doc.update(model_name_or_path=str(tiny_model("qwen3-vl")), datasets=[str(data)], max_eval_samples=8)
        path = Path(folder) / "recipe.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(doc))
        return path

    return write


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """Three short physics clips and a hand-written video-MCQ manifest (DESIGN.md fields), for the
    PhaseFusion, consistency-tuning and NExT-QA tests."""
    import json

    from judgetrain.data_builders.synthetic import write_physics_videos

    root = tmp_path_factory.mktemp("pf-clips")
    write_physics_videos(root, 3, seed=11, size=(64, 48), duration_range_s=(3.0, 5.0), progress=False)
    lines = [
        {"id": "pf-0", "video": "videos/physics-00000.mp4", "question": "Which object touches the floor first?",
         "options": ["the red ball", "the blue cube", "the green cylinder"], "answer": 1, "benchmark": "synthetic-physics"},
        {"id": "pf-1", "video": "videos/physics-00001.mp4", "question": "Which two objects collide first?",
         "options": ["red and blue", "blue and green", "red and green", "none"], "answer": 3, "benchmark": "synthetic-physics"},
        {"id": "pf-2", "video": "videos/physics-00002.mp4", "question": "Which object moves fastest?",
         "options": ["the cube", "the ball"], "answer": 0, "benchmark": "synthetic-physics", "duration": 4.0},
    ]
    (root / "manifest.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root / "manifest.jsonl"


@pytest.fixture(scope="session")
def start_postgres():
    """``start_postgres()``: the URL of a new PostgreSQL server on 127.0.0.1, started from the
    Debian binaries (``make system-deps``; skipped without them) in a folder of its own, as the
    ``postgres`` user when the tests run as root (initdb refuses root). Every server started is
    stopped and removed when the session ends."""
    import shutil
    import socket
    import subprocess

    started: list[tuple[list[str], Path, Path]] = []

    def start() -> str:
        versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not versions:
            pytest.skip("PostgreSQL server binaries not found: run `make system-deps` (Debian package postgresql)")
        bindir = versions[-1].parent
        root = Path(tempfile.mkdtemp(prefix="judgetrain-pg-"))
        root.chmod(0o755)
        prefix: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
            prefix = ["runuser", "-u", "postgres", "--"]
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        subprocess.run([*prefix, str(bindir / "initdb"), "-D", str(root / "data"), "-U", "postgres", "--auth=trust"],
                       check=True, capture_output=True)
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(root / "data"), "-l", str(root / "log"), "-w", "-o",
                        f"-p {port} -k {root} -c listen_addresses=127.0.0.1", "start"], check=True, capture_output=True)
        started.append((prefix, bindir, root))
        return f"postgresql://postgres@127.0.0.1:{port}/postgres"

    yield start
    for prefix, bindir, root in started:
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
