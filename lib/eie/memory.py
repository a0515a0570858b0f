"""Memory the large calls need, checked before they start.

Decoding at n nodes, the EIE fit and lambda* up to N_max all grow with n; asked for a length the
machine cannot hold (n = 100 000 at a batch of 256, say), they would fill the memory for minutes
before the allocator fails, or the system kills the process. Each entry point estimates its peak
from its arguments (`eie.evaluation.decoding_bytes`, `eie.entropy.eq6_bytes`), compares it with the
memory available on the device, and refuses a call that does not fit with the largest length that
would, so the fix (a smaller length or chunk) is in the message.
"""

from __future__ import annotations

import os

import torch

# Leave this share of what is available to everything else the process and the machine hold.
USABLE_SHARE = 0.8


class NotEnoughMemory(MemoryError):
    """A call's estimated peak exceeds the memory available on its device."""


def available_bytes(device="cpu") -> int | None:
    """Memory the device can still give: free GPU memory, or the host's MemAvailable (Linux) /
    free physical pages; None when it cannot be told (the check is then skipped)."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def largest_fitting(need, limit: int, low: int, high: int) -> int | None:
    """The largest integer x in [low, high] with need(x) <= limit (need increasing), None if none."""
    if need(low) > limit:
        return None
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if need(middle) <= limit else (low, middle - 1)
    return low


def check_fits(what: str, need, x: int, device="cpu", name: str = "n", low: int = 2, advice: str = "") -> None:
    """Raise NotEnoughMemory when `need(x)` bytes exceed the usable share of the device's available
    memory, naming `what`, the estimate, what is available and the largest `name` that fits."""
    available = available_bytes(device)
    if available is None:
        return
    limit = int(USABLE_SHARE * available)
    needed = need(x)
    if needed <= limit:
        return
    fits = largest_fitting(need, limit, low, x)
    largest = f"the largest {name} that fits is {fits}" if fits is not None else f"not even {name} = {low} fits"
    raise NotEnoughMemory(f"{what} at {name} = {x} needs about {needed / 2**30:.1f} GiB; "
                          f"{available / 2**30:.1f} GiB is available on {torch.device(device).type} "
                          f"({USABLE_SHARE:.0%} of it usable): {largest}{'; ' + advice if advice else ''}")
