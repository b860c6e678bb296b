"""CRD schemas as apiextensions enforces them: structural check at install (`structural`),
pruning, defaulting, validation and CEL rules of custom objects (`layers` ties them for the
store; `FakeKubeApi.crd_schema_layers = False` turns them all off)."""
