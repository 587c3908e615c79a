from vmtune.main import run

run()
