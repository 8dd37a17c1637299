"""Tables and documents built from stored runs (`python -m engine docs-tables`): high in the house, since they read
what faithfulness and simulability write into the results store (`engine.results`, low)."""
