"""Sandbox backends (imported as `featdel.sandboxes`): where untrusted code runs."""
