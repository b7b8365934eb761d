"""blob-safetynet: one import package. `blob_safetynet.protocol` is what an application uses
(the upload protocol; `store`, `sweeper`, `reconcile`, `settings` and `function` are the rest of
the run time), `blob_safetynet.policies` the rules, audit and probes, `blob_safetynet.infra` the Pulumi
components (the `[infra]` extra), `blob_safetynet.cli` the `safetynet` command."""

from importlib.metadata import version


def package_version() -> str:
    """The installed distribution's version: pyproject.toml's, the one version source."""
    return version("blob-safetynet")
