"""The stages from a corpus to packaged tasks: mine, delete, verify, package, and the executors they run on."""
