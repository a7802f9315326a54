"""ExperimentSpec's cheap views of its cells (run_ids, cell_count) agree with `cells()`: the
report orders runs by `run_ids()`, so a different order would misplace every comparison."""

from __future__ import annotations

from workflows.catalog.models import ArmSpec, ExperimentSpec


def _spec() -> ExperimentSpec:
    return ExperimentSpec(
        experiment_id="pr/acme/agent/7",
        repo="/repo",
        dataset="d",
        case_ids=("b-case", "a-case", "c-case"),
        arms=(
            ArmSpec(name="main", ref="main", commit="a" * 40),
            ArmSpec(name="pr", ref="pr", commit="b" * 40),
            ArmSpec(name="alt", ref="alt", commit="c" * 40),
        ),
        trials=2,
    )


def test_run_ids_are_the_cells_run_ids_in_cell_order() -> None:
    spec = _spec()
    assert spec.run_ids() == [cell.run_id for cell in spec.cells()]
    assert spec.run_ids()[:3] == [
        "pr/acme/agent/7/b-case/main/0",
        "pr/acme/agent/7/b-case/main/1",
        "pr/acme/agent/7/b-case/pr/0",
    ]


def test_cell_count_is_the_number_of_cells() -> None:
    spec = _spec()
    assert spec.cell_count == len(spec.cells()) == 18
