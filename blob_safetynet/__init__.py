"""blob-safetynet: one import package. `blob_safetynet.protocol` is what an application uses
(the upload protocol; `store`, `sweeper`, `reconcile`, `settings` and `function` are the rest of
the run time), `blob_safetynet.policies` the rules, audit and probes, `blob_safetynet.infra` the Pulumi
components (the `[infra]` extra), `blob_safetynet.cli` the `safetynet` command."""


def package_version() -> str:
    """The installed distribution's version: pyproject.toml's, the one version source."""
    # Imported here: every import of the package would pay for importlib.metadata, and the
    # console script's start-up runs before its signal handlers are in place (cli/startup.py).
    from importlib.metadata import version

    return version("blob-safetynet")
