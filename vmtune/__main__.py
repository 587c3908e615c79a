from vmtune.main import main

main()
