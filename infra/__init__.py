"""The Pulumi program: a storage account with its safety nets (see the README, "Provision an account")."""
