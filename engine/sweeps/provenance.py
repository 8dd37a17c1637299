"""The one provenance record of a computed result: which command and code made it, from which weights, when,
where and how long it took. Every sweep writes it beside its cells (and the attention diagnostics beside their
summary), so the field names are the same everywhere."""
from __future__ import annotations

import os
import platform
import time


def provenance(command: str, started: float, classifier=None, *, masf=None, n_examples: int | None = None,
               checkpoint_sha256: str | None = None, **extra) -> dict:
    """The provenance dict of one result.

    Args:
        command: the command line (or the function) that computed it.
        started: `time.time()` when its computation began (gives `seconds`).
        classifier: the engine Classifier it explains, or None (then no checkpoint fields but a passed
            `checkpoint_sha256`; `machine` names no device and `runtime` is the process's).
        masf: the MaSF whose p-values it holds (its stored fit's provenance is recorded), or None.
        n_examples: the number of examples it averages over, when that applies.
        checkpoint_sha256: the weights' hash when the caller has it already (hashing a large model takes a while).
        **extra: fields of this kind of result (measure options, removal, cost ...), added last.

    Returns:
        {command, code_version, created (UTC, ISO 8601), seconds, machine, runtime, [checkpoint,
        checkpoint_sha256, checkpoint_code_version, model_runtime], [masf], [n_examples], **extra}.
    """
    from engine.runtime import code_version, runtime_record

    device = getattr(classifier, "device", None)
    record = {"command": command, "code_version": code_version(),
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "seconds": round(time.time() - started, 1),
              "machine": f"{platform.machine()} {os.cpu_count()} cpus" + (f", {device}" if device is not None else ""),
              "runtime": runtime_record(device)}  # GPU, versions and determinism flags
    if classifier is not None:
        record.update({
            "checkpoint": classifier.id,
            "checkpoint_sha256": checkpoint_sha256 or classifier.weights_sha256,
            "checkpoint_code_version": classifier.meta.code_version,
            "model_runtime": classifier.runtime,  # dtype and attention kernel the numbers were computed with
        })
    elif checkpoint_sha256 is not None:
        # No classifier at hand (e.g. a sweep that worked from precomputed teacher outputs): the hash the caller
        # passed still says which weights the result came from.
        record["checkpoint_sha256"] = checkpoint_sha256
    if masf is not None:
        from engine.ood import masf_provenance

        # A stored MaSF fit is reused across sweeps: record which code fitted it, when, and on what data.
        record["masf"] = masf_provenance(masf)
    if n_examples is not None:
        record["n_examples"] = n_examples
    record.update(extra)
    return record
