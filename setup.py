"""The one part of the build pyproject.toml cannot declare for every setuptools this project
supports: two optional C modules, each with the Python it stands in for (see their headers): the
reader of YAML manifests (vmtune/stacks/_yamlnodes.c) and STK003's walk of KubeVirt's fields
(vmtune/stacks/kubevirt/_fields.c). Without a compiler (or libyaml's headers, for the reader) each
is skipped, and vmtune reads YAML with PyYAML alone and walks the fields in Python."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("vmtune.stacks._yamlnodes", ["vmtune/stacks/_yamlnodes.c"], libraries=["yaml"],
                             optional=True),
                   Extension("vmtune.stacks.kubevirt._fields", ["vmtune/stacks/kubevirt/_fields.c"], optional=True)])
