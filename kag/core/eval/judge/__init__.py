"""The judge process (trusted side): the reference, the seeds, the inputs, the judge's clock, the
checks of every call of its candidate and the verdict."""
