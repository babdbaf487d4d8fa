"""The docs site's build-time generation (mkdocs hooks): reference pages written from the code
itself, so that they cannot drift from it.

`hooks` is the module mkdocs loads (mkdocs.yml names it); it replaces each
`<!-- reference: KIND TARGET -->` line of a page with what `cli_reference` (a command, from
its argparse parser) or `model_reference` (config keys and wire fields, from their pydantic
models) writes.
"""
