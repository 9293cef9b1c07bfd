"""Pre-activation ResNet-18 ("ResNet-18 v2", He et al. 2016, "Identity Mappings in Deep Residual
Networks") for 32x32 CIFAR images.

Layout: 3x3 stem conv (no BN/ReLU after it: the first block's BN-ReLU follows), four stages of two
pre-activation basic blocks with strides 1/2/2/2 and widths w, 2w, 4w, 8w, a final BN-ReLU (the v2
paper's last activation, since the residual stream itself is never normalised), global average pool,
linear. `width` = 64 and `blocks` = 2 are the paper's network; the tiny preset uses a narrow, shallow one
(one block per stage: a ResNet-10 v2) through the same code.
"""

from __future__ import annotations

import torch
from torch import nn


class PreActBlock(nn.Module):
    """BN-ReLU-conv3x3-BN-ReLU-conv3x3 plus an identity (or 1x1 projection) shortcut.

    The projection, when needed, reads the pre-activated input, as in He et al.'s v2 code: the
    shortcut then sees the same normalised signal as the residual branch."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_ch)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, stride=1, padding=1, bias=False)
        self.shortcut: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(x))
        skip = self.shortcut(out) if self.shortcut is not None else x
        out = self.conv1(out)
        out = self.conv2(torch.relu(self.bn2(out)))
        return out + skip


class PreActResNet18(nn.Module):
    """ResNet-18 v2 for CIFAR: 2 blocks per stage (`blocks`), strides 1/2/2/2, widths w·(1, 2, 4, 8)."""

    def __init__(self, width: int = 64, num_classes: int = 10, blocks: int = 2) -> None:
        super().__init__()
        if width < 1:
            raise ValueError(f"width must be positive, got {width}")
        if blocks < 1:
            raise ValueError(f"blocks must be positive, got {blocks}")
        self.stem = nn.Conv2d(3, width, 3, stride=1, padding=1, bias=False)
        stages = []
        in_ch = width
        for i, stride in enumerate((1, 2, 2, 2)):
            out_ch = width * 2**i
            rest = [PreActBlock(out_ch, out_ch, 1) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(PreActBlock(in_ch, out_ch, stride), *rest))
            in_ch = out_ch
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.bn = nn.BatchNorm2d(in_ch)
        self.fc = nn.Linear(in_ch, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        # He (fan_out) init for convs and unit/zero BN, as torchvision's ResNets do: the paper's init.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.relu(self.bn(x))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)
