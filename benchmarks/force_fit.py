"""Copy an index and store a forced pattern-stage fit in the copy, to measure one setting with ``simgrag bench``.

Modes (the copy keeps the index's own fit but for what the mode changes):

- ``floor``: the LLM's own patterns — the stage off, no channel choice, no default readings, no kind prior (the
  paper's search, as ``--no-grounding --no-channel``);
- ``default``: the index's fit, with the default readings spelled out as a channel setting;
- ``longer``: the channel on at margin 0 with the named, contracted and longer readings;
- ``sampled``: ``longer`` plus the patterns the LLM samples for the question (BENCHMARKS.md "Sampled readings");
- ``variant``: the index's fit with the variant among its default readings (BENCHMARKS.md "Variant readings");
- ``nokinds``: the index's fit with the search's kind prior off (BENCHMARKS.md "Kind prior").

    python benchmarks/force_fit.py runs/wc_learn.idx runs/wcl_sampled.idx sampled
    simgrag bench wc2014 --wc-dir ../shared/data/WC2014 --index runs/wcl_sampled.idx --groups 2-hop --sample 100
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import replace
from pathlib import Path

from simgrag.grounding.fit import GroundingFit, read_fit, store_fit
from simgrag.index.attach import read_manifest_json

MODES = ("floor", "default", "longer", "sampled", "variant", "nokinds")


def forced(fit: GroundingFit, mode: str) -> GroundingFit:
    """``fit`` with the ``mode``'s setting (module docstring)."""
    info = dict(fit.info)
    if mode == "floor":
        return GroundingFit(False, (), info, named_margin=None, kind_prior=False)
    if mode == "nokinds":
        return replace(fit, info=info, kind_prior=False)
    if mode == "variant":  # at the fit's own margin for its default readings (0 where it had turned them off)
        return replace(fit, info=info, variant=True, named_margin=0.0 if fit.named_margin is None else fit.named_margin)
    if mode == "default":
        if fit.channel or fit.named_margin is None:
            return fit
        return GroundingFit(fit.enabled, fit.disabled, info, channel=True, channel_margin=fit.named_margin,
                            channel_readings=("named", "contracted", "longer"), named_margin=fit.named_margin)
    readings = ("named", "contracted", "longer", *(("sampled",) if mode == "sampled" else ()))
    return GroundingFit(fit.enabled, fit.disabled, info, channel=True, channel_margin=0.0,
                        channel_readings=readings, named_margin=fit.named_margin)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index", type=Path, help="the index directory to copy (left as it is)")
    parser.add_argument("copy", type=Path, help="where the copy goes (replaced if it exists)")
    parser.add_argument("mode", choices=MODES)
    args = parser.parse_args()
    if args.copy.resolve() == args.index.resolve():
        parser.error("the copy must not be the index itself")
    if args.copy.exists():
        shutil.rmtree(args.copy)
    shutil.copytree(args.index, args.copy)
    fit = forced(read_fit(read_manifest_json(args.copy)) or GroundingFit(False, named_margin=0.0), args.mode)
    store_fit(args.copy, fit)
    print(args.copy, fit.describe())


if __name__ == "__main__":
    main()
