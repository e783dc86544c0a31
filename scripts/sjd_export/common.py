"""Helpers shared by the exporters: reading release configs, writing tensors and bundle.json, and saying what was written."""
import contextlib
import glob
import json
import math
import os
import pickle
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

import torch
from safetensors import SafetensorError


@contextlib.contextmanager
def reading(path):
    """Errors of the readers (torch.load, safetensors, a text decode) as one ValueError that names `path`:
    "PytorchStreamReader failed reading zip archive" or "No module named 'x'" named no file."""
    try:
        yield
    except (RuntimeError, pickle.UnpicklingError, ImportError, AttributeError, EOFError, SafetensorError,
            UnicodeDecodeError) as error:
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        if isinstance(error, ImportError):
            text += " (the checkpoint pickles objects of a module that is not installed)"
        raise ValueError(f"{path}: cannot be read: {text}") from None


def matrix_shape(tensors, name, where):
    """The (rows, columns) of a 2-D tensor, else ValueError naming it."""
    shape = tuple(need(tensors, name, where).shape)
    if len(shape) != 2:
        raise ValueError(f"{where}: tensor {name} has shape {list(shape)}, expected a matrix")
    return shape


def write_json_atomic(path, data):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, indent=2)
        out.write("\n")
    os.replace(tmp, path)


def save_safetensors(path, tensors):
    """Contiguous CPU tensors to a .safetensors file (atomically)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    save_file({k: v.detach().cpu().contiguous() for k, v in sorted(tensors.items())}, str(tmp))
    os.replace(tmp, path)


class _TensorArchive(torch.nn.Module):
    """A module whose buffers are the tensors, named with '.' (nested modules)."""

    def __init__(self, tensors):
        super().__init__()
        for name, tensor in tensors.items():
            owner = self
            *parents, leaf = name.split(".")
            for part in parents:
                if not hasattr(owner, part):
                    owner.add_module(part, torch.nn.Module())
                owner = getattr(owner, part)
            owner.register_buffer(leaf, tensor.detach().cpu().contiguous())


def save_torchscript(path, tensors):
    """Tensors as a TorchScript archive readable by torch::jit::load (the product's format)."""
    import warnings

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TorchScript is deprecated on the Python side; C++ loading stays
        scripted = torch.jit.script(_TensorArchive(tensors))
        tmp = path.with_name(f".{path.name}.tmp")
        torch.jit.save(scripted, str(tmp))
    os.replace(tmp, path)


def _short_name(name, keep_bytes=160):
    """`name`, or for a name of over 176 bytes (the staging folder's name adds about 25 to it, and a file name may
    have 255), its first `keep_bytes` bytes (whole characters) and the CRC-32 of the whole: the same name gives
    the same tag, so a later export still finds an abandoned staging folder."""
    encoded = os.fsencode(name)
    if len(encoded) <= keep_bytes + 16:
        return name
    return f"{encoded[:keep_bytes].decode('utf-8', errors='ignore')}~{zlib.crc32(encoded):08x}"


class StagedBundle:
    """Where an export writes: a staging folder beside the bundle folder `out`, whose files replace the folder's
    only once the whole export has succeeded (bundle.json last), so that a failed export leaves the folder as it
    was, never a bundle.json beside weights of another export, or naming a file the export removed. `stage` is
    where to write; `out` is the bundle's own folder, for what depends on it (is it the release folder itself?).
    The staging folder lies beside the folder `out` resolves to (a link to another file system included), so that
    every move is a rename; its name holds the process id, so that one an interrupted export left is removed."""

    def __init__(self, out):
        self.out = Path(out)
        if self.out.is_symlink() and not self.out.exists():
            raise NotADirectoryError(f"--out {self.out}: a link to nothing ({os.readlink(self.out)})")
        if self.out.exists() and not self.out.is_dir():
            raise NotADirectoryError(f"--out {self.out}: exists and is not a folder")
        self.target = self.out.resolve()
        self.made_parents = []  # folders made for the bundle's, removed again by a failure
        parent = self.target.parent
        while not parent.exists():
            self.made_parents.append(parent)
            parent = parent.parent
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.tag = f".{_short_name(self.target.name)}.export-"
        self._remove_abandoned_stages()
        self.stage = Path(tempfile.mkdtemp(dir=self.target.parent, prefix=f"{self.tag}{os.getpid()}-"))

    def _remove_abandoned_stages(self):
        """Staging folders of exports into the same folder whose process is gone (killed, or out of memory)."""
        for stage in self.target.parent.glob(f"{glob.escape(self.tag)}*-*"):
            pid = stage.name[len(self.tag):].split("-")[0]
            if not pid.isdigit() or not stage.is_dir() or stage.is_symlink():
                continue
            try:
                os.kill(int(pid), 0)
                continue  # still exporting
            except ProcessLookupError:
                pass
            except PermissionError:
                continue  # another user's
            shutil.rmtree(stage, ignore_errors=True)
            print(f"export_bundle: removed {stage}, left by an export that was stopped", file=sys.stderr)

    def discard(self):
        shutil.rmtree(self.stage, ignore_errors=True)  # the links it holds are removed, never followed
        for folder in self.made_parents:  # innermost first
            try:
                folder.rmdir()
            except OSError:
                break

    def commit(self):
        """Moves every staged file into the bundle folder by renames (same file system), bundle.json last, with
        the permissions the user's umask gives new files (mkstemp and safetensors write owner-only files)."""
        umask = os.umask(0)
        os.umask(umask)
        self.target.mkdir(exist_ok=True)
        staged = sorted((path for path in self.stage.rglob("*") if not path.is_dir() or path.is_symlink()),
                        key=lambda path: path.relative_to(self.stage) == Path("bundle.json"))
        for path in staged:
            target = self.target / path.relative_to(self.stage)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_symlink():
                os.chmod(path, 0o666 & ~umask)
            os.replace(path, target)
        shutil.rmtree(self.stage, ignore_errors=True)


def link_release_weights(index_file, weight_map, staged):
    """Makes a release's sharded weights part of the bundle without copying them: the index and every shard are
    linked into the bundle (sjd confines the file names a bundle gives to its own folder, and follows links
    placed there). Returns the index's name in the bundle."""
    index_file = Path(index_file)
    # The folders, not the files: in a Hugging Face cache every file of a snapshot is a link into blobs/, so
    # the index itself resolves elsewhere even when --out is the snapshot (relinking there made each shard's
    # link point at itself).
    if index_file.parent.resolve() == staged.out.resolve():
        return index_file.name
    for name in [index_file.name, *sorted(set(weight_map.values()))]:
        link = staged.stage / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to((index_file.parent / name).resolve())
    return index_file.name


def copy_into_bundle(source, staged, name):
    """Copies `source` into the bundle as `name` (unless it is that file already: the release folder's own). What
    is in the bundle folder is replaced by a rename: a link there (a Hugging Face cache's) is replaced, never
    written through into the file it points at."""
    source = Path(source)
    if (staged.out / name).exists() and source.resolve() == (staged.out / name).resolve():
        return
    target = staged.stage / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def read_weight_file(path):
    """The tensors of a .safetensors file, or of every shard an .index.json names."""
    from safetensors.torch import load_file

    path = Path(path)
    if path.name.endswith(".index.json"):
        tensors = {}
        for shard in sorted(set(need(read_json(path), "weight_map", str(path)).values())):
            with reading(path.parent / shard):
                tensors.update(load_file(str(path.parent / shard)))
        return tensors
    with reading(path):
        return load_file(str(path))


def convert_weights_to_torchscript(staged, written):
    """Rewrites the staged bundle to TorchScript weights: the transformer's tensors go to model.pt, the VQ
    decoder's to vq.pt (same names and dtypes), and bundle.json names those. The weight files the exporter wrote
    are dropped (LlamaGen's gpt.safetensors, the VQ's); a release's index and shards, linked into the bundle or in
    it when it is the release folder, stay. Returns the report's lines (`written`) for the files the bundle now
    has."""
    bundle = read_json(staged.stage / "bundle.json")
    dropped = set()
    for section, archive in (("transformer", "model.pt"), ("vq", "vq.pt")):
        files = bundle[section]["weights"]
        files = [files] if isinstance(files, str) else files
        tensors = {}
        for name in files:
            # Staged: written by this export; else in the bundle folder, the release's own.
            path = staged.stage / name if (staged.stage / name).exists() else staged.out / name
            tensors.update(read_weight_file(path))
        save_torchscript(staged.stage / archive, tensors)
        for name in files:
            if (staged.stage / name).exists() and not (staged.stage / name).is_symlink():
                (staged.stage / name).unlink()
                dropped.add(name)
        bundle[section]["weights"] = [archive]
        written = written + [(archive, f"{len(tensors)} {section} tensors as a TorchScript archive "
                                       "(loaded only with --trust-code)")]
    write_json_atomic(staged.stage / "bundle.json", bundle)
    return [(name, what) for name, what in written if name not in dropped]


def load_state_dict(path):
    """A pickled checkpoint's state dict, under 'model', 'module' or 'state_dict' if nested."""
    with reading(path):
        checkpoint = torch.load(str(path), map_location="cpu", weights_only=False)
    for key in ("model", "module", "state_dict"):
        if isinstance(checkpoint, dict) and key in checkpoint and isinstance(checkpoint[key], dict):
            checkpoint = checkpoint[key]
            break
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path}: no state dict found (expected a dict, or one under model/module/state_dict)")
    return {k: v for k, v in checkpoint.items() if isinstance(v, torch.Tensor)}


def report(out_dir, written):
    """Prints what the export wrote, one line per file."""
    print(f"wrote bundle {out_dir}:")
    for name, what in written:
        print(f"  {name}: {what}")


def read_json(path):
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    try:
        with reading(path):
            text = path.read_text(encoding="utf-8")
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: invalid JSON: {error}") from None


def read_release_index(hf_dir):
    """A sharded transformers release: its index file and weight map, every shard it names checked present."""
    index_file = Path(hf_dir) / "model.safetensors.index.json"
    weight_map = need(read_json(index_file), "weight_map", str(index_file))
    if not isinstance(weight_map, dict) or not all(isinstance(shard, str) for shard in weight_map.values()):
        raise ValueError(f"{index_file}: weight_map is not an object of tensor name -> shard file")
    for shard in sorted(set(weight_map.values())):
        if not (Path(hf_dir) / shard).is_file():
            raise FileNotFoundError(f"{index_file}: shard {shard} not found in {hf_dir}")
    return index_file, weight_map


def check_vq_shapes(tensors, expected, source):
    """The tensors a VQ decode starts from must be there with these shapes; sjd checks every shape when it loads."""
    for name, shape in expected.items():
        if name not in tensors:
            raise KeyError(f"{source}: tensor {name} is missing")
        if list(tensors[name].shape) != shape:
            raise ValueError(f"{source}: tensor {name} has shape {list(tensors[name].shape)}, expected {shape}")


def need(config, key, where):
    if not isinstance(config, dict):
        raise ValueError(f"{where}: expected an object with \"{key}\", found {type(config).__name__}")
    if key not in config or config[key] is None:
        raise KeyError(f"{where}: missing \"{key}\"")
    return config[key]


def as_int(value, key, where, minimum=1):
    """`value` as an int of at least `minimum` (a whole float such as 4096.0 too), else ValueError naming the key:
    int() took "abc" with a message naming neither, and a list with a traceback."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where}: \"{key}\" is {value!r}, expected an integer >= {minimum}")
    return value


def need_int(config, key, where, minimum=1):
    return as_int(need(config, key, where), key, where, minimum)


def optional_int(config, key, where, default, minimum=1):
    """config[key] as need_int reads it, or `default` where it is absent, null or 0 (as the releases' `x or y`)."""
    value = config.get(key) if isinstance(config, dict) else None
    return default if value is None or value == 0 else as_int(value, key, where, minimum)


def as_float(value, key, where):
    """A finite number, else ValueError naming the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where}: \"{key}\" is {value!r}, expected a finite number")
    return float(value)


def int_list(value, key, where, minimum=1):
    if not isinstance(value, list):
        raise ValueError(f"{where}: \"{key}\" is {value!r}, expected a list of integers")
    return [as_int(item, f"{key}[{i}]", where, minimum) for i, item in enumerate(value)]


def rope_theta(config, where):
    """Older configs (Lumina's) say rope_theta/rope_scaling; transformers 5 says rope_parameters."""
    params = config.get("rope_parameters")
    if isinstance(params, dict):
        if params.get("rope_type", "default") != "default":
            raise ValueError(f"{where}: rope_parameters.rope_type {params['rope_type']!r} is not supported (only default)")
        return as_float(need(params, "rope_theta", f"{where}: rope_parameters"), "rope_theta", where)
    if config.get("rope_scaling") is not None:
        raise ValueError(f"{where}: rope_scaling {config['rope_scaling']!r} is not supported (only none)")
    return as_float(config.get("rope_theta", 10000.0), "rope_theta", where)
