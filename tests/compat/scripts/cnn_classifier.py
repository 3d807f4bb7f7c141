"""A CNN classifier trained as PyTorch's MNIST example trains one: the device chosen from torch.cuda, cudnn
switches, a DataLoader, Adadelta with StepLR, an accuracy loop, a state-dict checkpoint.

`torch` is not imported here: the test loads this file as a module of its own with `torch` already bound to
PyTorch, or to ggrad (as `import ggrad as torch`).
"""

import os

nn = torch.nn  # noqa: F821  (bound by the test before this runs)
F = torch.nn.functional  # noqa: F821


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.0)
        self.fc1 = nn.Linear(8 * 3 * 3, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)  # noqa: F821
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def main(init, x, y, workdir):
    """Two epochs, then evaluation and a checkpoint round trip. Returns (losses, lrs after each epoch,
    correct predictions, summed test loss, whether the reloaded model gives the same outputs)."""
    torch.backends.cudnn.benchmark = True  # noqa: F821
    torch.backends.cudnn.deterministic = True  # noqa: F821
    use_cuda = torch.cuda.is_available()  # noqa: F821
    device = torch.device("cuda" if use_cuda else "cpu")  # noqa: F821
    kwargs = {"batch_size": 4}
    if use_cuda:
        kwargs.update({"num_workers": 1, "pin_memory": True})
    dataset = torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y))  # noqa: F821
    train_loader = torch.utils.data.DataLoader(dataset, **kwargs)  # noqa: F821
    model = Net().to(device)
    init(model)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)  # noqa: F821
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)  # noqa: F821
    losses, lrs = [], []
    for epoch in range(1, 3):
        model.train()
        for data, target in train_loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
    model.eval()
    correct, test_loss = 0, 0.0
    with torch.no_grad():  # noqa: F821
        for data, target in train_loader:
            output = model(data.to(device))
            test_loss += F.nll_loss(output, target.to(device), reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.to(device).view_as(pred)).sum().item()
    path = os.path.join(workdir, "mnist_cnn.pt")
    torch.save(model.state_dict(), path)  # noqa: F821
    restored = Net().to(device)
    restored.load_state_dict(torch.load(path))  # noqa: F821
    restored.eval()
    with torch.no_grad():  # noqa: F821
        inputs = torch.tensor(x).to(device)  # noqa: F821
        same = bool((restored(inputs) == model(inputs)).all())
    return losses, lrs, correct, test_loss, same
