"""The --device option the benchmarks share: time on the CPU, on CUDA (when present), or both."""

import torch


def add_device_option(parser) -> None:
    parser.add_argument("--device", choices=["all", "cpu", "cuda"], default="all",
                        help="where to time: 'all' (the CPU, and CUDA when present), 'cpu' or 'cuda'")


def chosen_devices(args) -> list[str]:
    """The devices `args.device` names, CUDA only when present; an error if none is left."""
    available = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    chosen = [device for device in available if args.device in ("all", device)]
    if not chosen:
        raise SystemExit(f"--device {args.device}: no such device on this machine (found: {', '.join(available)})")
    return chosen
