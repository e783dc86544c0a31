#!/usr/bin/env python3
"""Turn an original model release into an sjd bundle (a folder with bundle.json).

One subcommand per family; each explains what it wrote. Run with --help, or
`export_bundle.py FAMILY --help` for the files each family needs (docs/models.md
lists the downloads). Needs PyTorch 2.x and the pinned packages of requirements.txt.
"""
import argparse
import pickle
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from safetensors import SafetensorError  # noqa: E402
from sjd_export import FAMILIES  # noqa: E402
from sjd_export.common import StagedBundle, convert_weights_to_torchscript, report  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="family", required=True)
    for module in FAMILIES:
        module.add_parser(sub)
    for family_parser in sub.choices.values():
        family_parser.add_argument(
            "--weights-format", choices=("safetensors", "torchscript"), default="safetensors",
            help="torchscript: write the weights as TorchScript archives (model.pt, vq.pt) instead; sjd loads "
                 "them only with --trust-code, because loading a TorchScript archive runs code")
    args = parser.parse_args(argv)
    # SIGTERM and SIGHUP end the export as Ctrl-C does, through the handler below that removes the staging folder
    # (their default action would leave gigabytes of weights in it).
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, lambda received, frame: sys.exit(128 + received))
    staged = None
    try:
        # Written beside --out and moved in only when all of it is there: a failed export changes nothing.
        staged = StagedBundle(args.out)
        written = args.run(args, staged)
        if args.weights_format == "torchscript":
            written = convert_weights_to_torchscript(staged, written)
        staged.commit()
    except (OSError, KeyError, ValueError, RuntimeError, pickle.UnpicklingError, SafetensorError) as error:
        # A missing, unreadable or truncated file (safetensors' own error, torch.load's RuntimeError or
        # UnpicklingError) gets one line, not a traceback. KeyError's text is its key's repr: shown as written.
        if staged is not None:
            staged.discard()
        text = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"export_bundle: {text}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 -- input the checks above missed: still one line, never a traceback
        if staged is not None:
            staged.discard()
        print(f"export_bundle: unexpected {type(error).__name__}: {error} (input the exporter does not check yet; "
              "please report the command)", file=sys.stderr)
        return 2
    except BaseException:  # Ctrl-C: nothing half-written is left either
        if staged is not None:
            staged.discard()
        raise
    report(Path(args.out), written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
