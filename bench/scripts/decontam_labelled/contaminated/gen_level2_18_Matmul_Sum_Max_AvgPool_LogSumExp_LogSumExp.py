# contaminated: level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp, renamed and resized
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that performs a sequence of operations:
        - Matrix multiplication
        - Summation
        - Max
        - Average pooling
        - LogSumExp
        - LogSumExp
    """

    def __init__(self, v0_, v1_):
        super(Model, self).__init__()
        self.a0_ = nn.Linear(v0_, v1_)

    def forward(self, v0_):
        """
        Args:
            x (torch.Tensor): Input tensor of shape (batch_size, in_features).
        Returns:
            torch.Tensor: Output tensor of shape (batch_size, 1).
        """
        v0_ = self.a0_(v0_)
        v0_ = torch.sum(v0_, dim=1, keepdim=True)
        v0_ = torch.max(v0_, dim=1, keepdim=True)[0]
        v0_ = torch.mean(v0_, dim=1, keepdim=True)
        v0_ = torch.logsumexp(v0_, dim=1, keepdim=True)
        v0_ = torch.logsumexp(v0_, dim=1, keepdim=True)
        return v0_
batch_size = 96
in_features = 96
out_features = 96

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features]
