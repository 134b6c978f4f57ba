"""The scoring sandbox: untrusted answers run and scored in isolated processes (docs/sandbox.md)."""
