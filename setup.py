"""The one part of the build pyproject.toml cannot declare for every setuptools this project
supports: the optional C reader of YAML manifests (vmtune/stacks/_yamlnodes.c, see its header).
Without libyaml's headers or a compiler it is skipped, and vmtune reads YAML with PyYAML alone."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("vmtune.stacks._yamlnodes", ["vmtune/stacks/_yamlnodes.c"], libraries=["yaml"],
                             optional=True)])
