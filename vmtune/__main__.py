from vmtune.cli import main

main()
