"""The `featdel` command: modules that parse options, call one library function and print."""
