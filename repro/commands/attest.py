"""`repro attest RUN_DIR` and `repro attest verify FILE` (issue #38): a signed, offline-checkable reproduction."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from repro.core.errors import InputError
from repro.ui.options import DryRunOpt, GpusOpt, JsonOpt, RecipeOpt, WorkspaceOpt

KeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--key",
        help="Attest: the Ed25519 private key (PEM) to sign with; default the workspace's keys/attest-ed25519.pem, "
        "made 0600 on first use. Verify: the signer's public key (KEY.pem.pub) to trust; default the workspace's.",
    ),
]
LogsOpt = Annotated[
    Path | None,
    typer.Option("--logs", help="Verify: the result folder to check (default: the attestation's own folder)."),
]
ScenarioOpt = Annotated[
    str | None, typer.Option("--scenario", help="Which run to attest when the folder holds several.")
]


def attest(
    target: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN_DIR | verify FILE", help="A run (or rack) folder to attest; `verify FILE` checks one."
        ),
    ],
    key: KeyOpt = None,
    logs: LogsOpt = None,
    recipe: RecipeOpt = None,
    gpus: GpusOpt = None,
    scenario: ScenarioOpt = None,
    json: JsonOpt = False,
    dry_run: DryRunOpt = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Sign what a run's verdict rests on (in-toto, DSSE, Ed25519); `verify FILE` checks it offline, no GPU.

    Verify exits 0 when the signature, every file's hash and the verdict on the logs now all match; 1 when any
    differs (each difference named); 2 when the file cannot be read as an attestation or no key is trusted.
    """
    from repro.core.workspace import Workspace
    from repro.ui.output import emit

    root = Workspace.open(workspace).root
    if target and target[0] == "verify":
        if len(target) != 2:
            raise InputError("`repro attest verify` takes one attestation file.", "`repro attest verify FILE`")
        given = [flag for flag, v in (("--recipe", recipe), ("--gpus", gpus), ("--scenario", scenario)) if v]
        if given:
            raise InputError(
                f"{given[0]} is for `repro attest RUN_DIR`: verify re-runs repro verify as the attestation recorded.",
                f"`{shlex.join(['repro', 'attest', 'verify', target[1]])}`",
            )
        from repro.results.attest_verify import verify_file

        result = verify_file(Path(target[1]), logs, key, root, allowed_excludes=_rack_excludes())
        emit(result, json)
        raise typer.Exit(result.exit_code)
    if len(target) != 1:
        raise InputError("`repro attest` takes one run folder.", "`repro attest RUN_DIR`")
    if logs is not None:
        raise InputError("--logs is for `repro attest verify FILE --logs DIR`.", "`repro attest RUN_DIR`")
    from repro.core.signing import key_for_signing
    from repro.results.attest import plan, write
    from repro.ui.attest import Attested

    planned = plan(Path(target[0]), recipe=recipe, gpus=gpus, scenario=_scenario(scenario), exclude=_rack_excludes())
    signer, info = key_for_signing(key, root, create=not dry_run)
    write(planned, signer, dry_run=dry_run)
    emit(Attested(planned, info, dry_run), json)


def _scenario(value: str | None) -> str | None:
    from repro.commands.verify import _scenario as parse

    return parse(value)


def _rack_excludes() -> tuple[str, ...]:
    """A rack folder's image archive (gigabytes, and named by its digest already) is not a subject."""
    from repro.run.rack import IMAGE_DIR

    return (IMAGE_DIR,)
