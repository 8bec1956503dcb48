"""Attack: ModelNew is the reference Model."""
import model
import cuda_extension


class ModelNew(model.Model):
    pass
