"""The Pulumi program: a storage account with its safety nets (see docs/deployment.md)."""
