"""Tables and documents built from stored runs (`python -m engine report`): high in the house, since they read
what faithfulness and simulability write into the results store (`engine.results`, low)."""
