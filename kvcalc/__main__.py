from kvcalc.cli.app import main

main()
