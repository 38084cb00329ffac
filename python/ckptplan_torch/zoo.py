"""Small training steps of models from torchvision and torch.nn, for the
reality benchmark and the examples. Each factory returns (model, inputs):
model(*inputs) returns the scalar loss. Sizes are small enough that a step
takes about a second or two on two CPU cores, and large enough that the
activations, not the parameters and the optimizer step, decide the peak.

`python3 -m ckptplan_torch export --model ckptplan_torch.zoo:resnet18 ...`
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ClassifierLoss(nn.Module):
    """net(x) -> logits; the step's loss is their cross entropy."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


class SequenceClassifier(nn.Module):
    """An encoder over a (batch, seq, features) input and a linear head on
    the mean over the sequence."""

    def __init__(self, encoder, width, classes=10, recurrent=False):
        super().__init__()
        self.encoder = encoder
        self.recurrent = recurrent
        self.head = nn.Linear(width, classes)

    def forward(self, x, y):
        h = self.encoder(x)
        if self.recurrent:
            h = h[0]
        return F.cross_entropy(self.head(h.mean(1)), y)


def _images(batch, size, classes=10):
    return (torch.randn(batch, 3, size, size), torch.randint(0, classes, (batch,)))


def _sequences(batch, seq, features, classes=10):
    return (torch.randn(batch, seq, features), torch.randint(0, classes, (batch,)))


def resnet18(batch=32, size=112):
    """torchvision resnet18: BatchNorm, ReLU(inplace=True), residual adds."""
    import torchvision
    torch.manual_seed(0)
    return ClassifierLoss(torchvision.models.resnet18(num_classes=10)), _images(batch, size)


def mobilenet_v3_small(batch=16, size=112):
    """torchvision mobilenet_v3_small: Hardswish(inplace=True), squeeze-excite,
    BatchNorm, dropout in the classifier."""
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(num_classes=10)
    return ClassifierLoss(model), _images(batch, size)


def vit(batch=8, size=64):
    """torchvision VisionTransformer, 64 px, patch 8, 4 layers of width 128."""
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.VisionTransformer(image_size=size, patch_size=8, num_layers=4,
                                                 num_heads=4, hidden_dim=128, mlp_dim=512,
                                                 num_classes=10)
    return ClassifierLoss(model), _images(batch, size)


def transformer_encoder(batch=8, seq=64, d=256, layers=4):
    """nn.TransformerEncoder, 4 layers of width 256, dropout 0.1."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=4 * d, dropout=0.1,
                                       batch_first=True)
    encoder = nn.TransformerEncoder(layer, num_layers=layers)
    return SequenceClassifier(encoder, d), _sequences(batch, seq, d)


def lstm(batch=64, seq=32, features=64, hidden=128):
    """nn.LSTM, 2 layers."""
    torch.manual_seed(0)
    encoder = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
    return SequenceClassifier(encoder, hidden, recurrent=True), _sequences(batch, seq, features)


def gru(batch=64, seq=32, features=64, hidden=128):
    """nn.GRU, 2 layers."""
    torch.manual_seed(0)
    encoder = nn.GRU(features, hidden, num_layers=2, batch_first=True)
    return SequenceClassifier(encoder, hidden, recurrent=True), _sequences(batch, seq, features)


MODELS = {
    "resnet18": resnet18,
    "mobilenet_v3_small": mobilenet_v3_small,
    "vit": vit,
    "transformer_encoder": transformer_encoder,
    "lstm": lstm,
    "gru": gru,
}
