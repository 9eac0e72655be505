"""Error metrics between an observed tensor and a reference tensor of the same shape."""

from __future__ import annotations

import torch


def _difference(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    diff = observed.double() - reference.double()
    return diff if weights is None else diff / weights


def rel_l2(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None = None) -> float:
    """||(observed - reference) / weights|| / ||reference||, computed in float64; 0 when both are zero.
    `weights` (>= 1, elementwise; default 1) widen the allowance of elements known to be ill-conditioned."""
    diff = torch.linalg.vector_norm(_difference(observed, reference, weights).flatten()).item()
    scale = torch.linalg.vector_norm(reference.double().flatten()).item()
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


def max_abs(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None = None) -> tuple[float, int]:
    """The largest |observed - reference| / weights and the flat index where it occurs."""
    diff = _difference(observed, reference, weights).abs().flatten()
    if diff.numel() == 0:
        return 0.0, -1
    index = int(diff.argmax())
    return float(diff[index]), index


def max_rel(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None = None) -> tuple[float, int]:
    """max |observed - reference| / weights / max |reference|, and the flat index of the worst element."""
    error, index = max_abs(observed, reference, weights)
    scale = reference.double().abs().max().item() if reference.numel() else 0.0
    if scale == 0.0:
        return (0.0 if error == 0.0 else float("inf")), index
    return error / scale, index


class Float64Buffers:
    """Two float64 buffers the tensors of one comparison are copied into, one after the other. A fresh float64 copy
    of a 1.2 GiB gradient costs its page faults every time (the allocator hands large blocks back to the system):
    reusing the buffers halves the comparison of a 0.6b result on a CPU (benchmarks/harness_overhead.py)."""

    def __init__(self):
        self.buffers: dict[tuple[int, torch.device], torch.Tensor] = {}  # per device: a result's large tensors may be
        # compared on the GPU and its small ones on the host (_comparison_device)

    def copy(self, slot: int, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` in float64, in buffer `slot` of its device (grown as needed): contiguous, in `tensor`'s logical order."""
        buffer = self.buffers.get((slot, tensor.device))
        if buffer is None or buffer.numel() < tensor.numel():
            buffer = self.buffers[slot, tensor.device] = torch.empty(tensor.numel(), dtype=torch.float64, device=tensor.device)
        return buffer[:tensor.numel()].view(tensor.shape).copy_(tensor)


def tensor_errors(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None = None,
                  buffers: Float64Buffers | None = None) -> tuple[float, float, int]:
    """(rel_l2, max_rel, flat index of the worst element) in one pass over the tensors: one float64 copy of each
    (into `buffers` where given; a float64 reference is used as it is), the difference made in place (rel_l2 and
    max_rel made five float64 tensors of a 0.6b run's 1.2 GiB embedding gradient between them). The same numbers,
    bit for bit, as rel_l2 and max_rel: the same float64 operations on the same float64 values, in the same
    order (tests/test_metrics_one_pass.py)."""
    return errors_from_sums(error_sums(observed, reference, weights, buffers).tolist())


def error_sums(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None = None,
               buffers: Float64Buffers | None = None) -> torch.Tensor:
    """tensor_errors' reductions, left where the tensors are: [||diff||, ||reference||, max |diff|, its flat index,
    max |reference|] in float64 (the index exact below 2^53), for errors_from_sums. Nothing waits for the device, so
    the comparisons of a result's hundreds of tensors on a GPU queue up and come back in one copy."""
    buffers = buffers or Float64Buffers()
    if (target := _comparison_device(observed, reference, weights)) is not None:
        try:
            return _on(target, observed, reference, weights, buffers)
        except torch.OutOfMemoryError:  # the engine's next arm holds the GPU: on the host, slower
            return _on(torch.device("cpu"), observed, reference, weights, buffers)
    return _sums(observed, reference, weights, buffers)


def _sums(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None, buffers: Float64Buffers) -> torch.Tensor:
    """error_sums where the tensors are (one device)."""
    reference_64 = reference if reference.dtype == torch.float64 else buffers.copy(0, reference)
    # the difference in observed's own float64 copy (observed - reference_64 would skip the copy but runs 20x slower on a CPU)
    diff = buffers.copy(1, observed).sub_(reference_64)
    diff = diff if weights is None else diff.div_(weights)
    diff_norm = torch.linalg.vector_norm(diff.flatten())
    scale_l2 = torch.linalg.vector_norm(reference_64.flatten())
    if diff.numel() == 0:
        return torch.stack([diff_norm, scale_l2, *torch.tensor([0.0, -1.0, 0.0], dtype=torch.float64, device=diff.device)])
    diff = diff.abs_().flatten()
    index = diff.argmax()
    low, high = torch.aminmax(reference_64)  # max |reference| without an |reference| copy (reference_64 may be the caller's)
    return torch.stack([diff_norm, scale_l2, diff.gather(0, index.view(1))[0], index.double(), torch.maximum(-low, high)])


LARGE_ON_HOST = 1 << 24  # elements: a tensor this large held on the host in a run that uses a GPU is compared there


def _comparison_device(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None) -> torch.device | None:
    """Where to compare when not where the tensors are (None: where they are). Tensors on two devices (a host golden, a
    CPU oracle or a result kept on the host beside one on the GPU): on the GPU. Two large tensors both on the host in a
    process that uses a GPU (results of a CUDA run beyond the harness's share of it, harness/launch/device_result.py):
    on the GPU too. A CPU run never initialises CUDA, so its float64 rows are computed as they always were."""
    devices = {observed.device, reference.device} | ({weights.device} if weights is not None else set())
    gpu = sorted((d for d in devices if d.type == "cuda"), key=str)
    if len(devices) > 1:
        return gpu[0] if gpu else torch.device("cpu")
    if not gpu and observed.numel() >= LARGE_ON_HOST and torch.cuda.is_initialized():
        return torch.device("cuda", torch.cuda.current_device())
    return None


def _on(device: torch.device, observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None,
        buffers: Float64Buffers) -> torch.Tensor:
    """error_sums with every tensor brought to `device`, one tensor at a time: on the GPU where one of them is there (a
    float64 comparison of an 8B gradient on the host takes half a minute, on the GPU a fraction of a second)."""
    return _sums(observed.to(device), reference.to(device), None if weights is None else weights.to(device), buffers)


BATCH_ELEMENTS = 1 << 27  # elements per batch of batched_error_sums: two float64 copies of 1 GiB each at most (a larger tensor alone)


def batchable(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> bool:
    """Whether batched_error_sums takes these pairs in a run: every tensor on one CUDA device (a GPU run's results; never a
    CPU run, whose float64 rows stay those of error_sums bit for bit), none empty, each pair of one shape."""
    devices = {t.device for pair in pairs for t in pair}
    return (len(devices) == 1 and next(iter(devices)).type == "cuda"
            and all(a.shape == b.shape and a.numel() for a, b in pairs))


def batched_error_sums(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
    """error_sums of every (observed, reference) pair, unweighted, with a few kernels per batch of tensors rather than a
    dozen per tensor: a 0.6b result's 311 gradients are ~4,000 small kernel launches one tensor at a time on a GPU
    (launch-bound: docs/performance.md). The pairs are grouped by dtypes and packed into batches of BATCH_ELEMENTS;
    each batch's tensors are concatenated, made float64 and subtracted at once, their norms and greatest values taken
    by multi-tensor (torch._foreach_*) reductions over views of the concatenation; only the worst element's index is an
    argmax per tensor. Nothing waits for the device. Numerically equivalent to error_sums, not bit-equal: the norms
    sum in another order (the differences and maxima are the same float64 values; tests/test_metrics_batched.py
    states the tolerance). Used on CUDA tensors only (`batchable`); works on any device."""
    sums: list[torch.Tensor | None] = [None] * len(pairs)
    groups: dict[tuple[torch.dtype, torch.dtype], list[int]] = {}
    for index, (observed, reference) in enumerate(pairs):
        groups.setdefault((observed.dtype, reference.dtype), []).append(index)
    for indices in groups.values():
        batch, size = [], 0
        for index in sorted(indices, key=lambda i: pairs[i][0].numel()):
            if batch and size + pairs[index][0].numel() > BATCH_ELEMENTS:
                _batch_sums(pairs, batch, sums)
                batch, size = [], 0
            batch.append(index)
            size += pairs[index][0].numel()
        _batch_sums(pairs, batch, sums)
    return sums


def _batch_sums(pairs: list[tuple[torch.Tensor, torch.Tensor]], batch: list[int], sums: list) -> None:
    """One batch of batched_error_sums: sums[i] for every i of `batch`, the five values of error_sums each."""
    sizes = [pairs[i][0].numel() for i in batch]
    reference_64 = torch.cat([pairs[i][1].reshape(-1) for i in batch]).double()  # the flat concatenation in float64: N_
    diff_64 = torch.cat([pairs[i][0].reshape(-1) for i in batch]).double().sub_(reference_64)  # N_
    diffs, references = diff_64.split(sizes), reference_64.split(sizes)
    diff_norm = torch.stack(torch._foreach_norm(diffs, 2))  # B_
    scale_l2 = torch.stack(torch._foreach_norm(references, 2))  # B_
    scale_max = torch.stack(torch._foreach_norm(references, float("inf")))  # max |reference|, B_
    diff_64.abs_()
    index = torch.stack([d.argmax() for d in diffs])  # the flat index in each tensor: B_
    starts = torch.tensor([0, *sizes[:-1]], dtype=torch.int64).cumsum(0).to(diff_64.device)
    error = diff_64[starts + index]  # max |diff|, B_
    values = torch.stack([diff_norm, scale_l2, error, index.double(), scale_max], dim=1)  # B_ x 5
    for row, i in enumerate(batch):
        sums[i] = values[row]


def sums_to_host(sums: list[torch.Tensor]) -> list[list[float]]:
    """error_sums' results as numbers, one copy per device they were left on (a result on the GPU may be compared with
    a host golden beside its GPU arms), in the order given."""
    values: list[list[float]] = [[] for _ in sums]
    on: dict[torch.device, list[int]] = {}
    for index, sum_ in enumerate(sums):
        on.setdefault(sum_.device, []).append(index)
    for indices in on.values():
        for index, numbers in zip(indices, torch.stack([sums[i] for i in indices]).tolist()):
            values[index] = numbers
    return values


def errors_from_sums(sums: list[float]) -> tuple[float, float, int]:
    """(rel_l2, max_rel, flat index of the worst element, -1 for an empty tensor) from error_sums' five values."""
    diff_norm, scale_l2, error, index, scale_max = sums
    l2 = (0.0 if diff_norm == 0.0 else float("inf")) if scale_l2 == 0.0 else diff_norm / scale_l2
    if index < 0:
        return l2, 0.0, -1
    return l2, (0.0 if error == 0.0 else float("inf")) if scale_max == 0.0 else error / scale_max, int(index)


def rel(observed: float, reference: float) -> float:
    if reference == 0.0:
        return 0.0 if observed == 0.0 else float("inf")
    return abs(observed - reference) / abs(reference)


def rel_nats(observed: float, reference: float) -> float:
    """A loss's error: relative for a loss of one nat or more, absolute (in nats) below. A policy loss near zero is a
    difference of terms of a nat or so (measured on an H200, float32: -1.5187e-4 vs -1.5157e-4, 3e-7 nats apart,
    is 1.9e-3 relative), so its relative error measures the cancellation, not the engine."""
    return abs(observed - reference) / max(abs(reference), 1.0)


def flat_index_to_position(index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    position = []
    for size in reversed(shape):
        position.append(index % size)
        index //= size
    return tuple(reversed(position))
