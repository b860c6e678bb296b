"""DataDog's Watermark Pod Autoscaler: the CRD (crd), its validation, proposals, gates and the decision."""
