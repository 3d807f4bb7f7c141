"""`ggrad.Sequential`: the Keras-style model, a PyTorch `nn.Sequential` that inherits its `Trainer`.

    model = ggrad.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 3))
    model.compile(optimizer="adamw", loss="cross_entropy", metrics=["accuracy"], lr=1e-2)
    history = model.fit(x, y, epochs=10, batch_size=64, validation_split=0.2)
    probs = ggrad.softmax(ggrad.tensor(model.predict(x_new)), -1)
    model.save("m.ggrad"); model = ggrad.Sequential.load("m.ggrad")

Why two classes: `ggrad.nn.Sequential` is PyTorch's container and stays in `nn`, whose layers never
import `optim` or `train`; this subclass adds what Keras' Sequential has (the trainer's compile / fit /
evaluate / predict, and summary, save, load, get_config), as Keras' Model inherits its Trainer. It is
still an `nn.Sequential` (indexing, slicing, `+` as there). Code written for the earlier
`nn.Sequential(...).compile(...)` changes `nn.Sequential` to `ggrad.Sequential`; models saved by it load.
"""

import json

from .. import ggml, nn
from ..autograd import no_grad
from ..autograd.factory import zeros
from ..serialization import load as load_file, save as save_file
from .architecture import build_sequential, record_config, sequential_config
from .trainer import Trainer

FORMAT = "ggrad.Sequential"
VERSION = 1


class Sequential(Trainer, nn.Sequential):
    """Layers called in order (`nn.Sequential`) with Keras' training API (`Trainer`), `summary`,
    `save` / `Sequential.load`.

    y = layers[-1](... layers[1](layers[0](x)))
    """

    def __init__(self, *args):
        nn.Sequential.__init__(self, *args)

    def add_module(self, name, module):
        super().add_module(name, module)
        if module is not None:
            record_config(module)  # now: the constructor arguments as the layer holds them

    def __setitem__(self, idx, module):
        super().__setitem__(idx, module)
        record_config(module)

    # ---- summary ------------------------------------------------------------------------------------
    def summary(self, input_shape=None, print_fn=print):
        """A table of the layers, their output shapes and parameter counts; printed and returned.

        Output shapes need the input's shape (without the batch dimension): `input_shape`, or the
        first Linear's in_features. They are worked out without computing anything.
        """
        first = self._ends()[0]
        if input_shape is None and isinstance(first, nn.Linear):
            input_shape = (first.in_features,)
        shapes = self._output_shapes(tuple(input_shape)) if input_shape is not None else None
        rows = []
        for i, (name, layer) in enumerate(self._modules.items()):
            count = sum(p.numel() for p in layer.parameters())
            shape = "?" if shapes is None else "(None, " + ", ".join(str(s) for s in shapes[i]) + ")"
            rows.append((f"{name} ({type(layer).__name__})", shape.replace(", )", ")"), f"{count:,}"))
        total = sum(p.numel() for p in self.parameters())
        trainable = sum(p.numel() for p in self.parameters() if p.requires_grad)
        w0 = max([len("Layer (type)")] + [len(r[0]) for r in rows]) + 2
        w1 = max([len("Output Shape")] + [len(r[1]) for r in rows]) + 2
        w2 = max([len("Param #")] + [len(r[2]) for r in rows])
        rule = "-" * (w0 + w1 + w2)
        lines = ['Model: "sequential"', rule, f"{'Layer (type)':<{w0}}{'Output Shape':<{w1}}{'Param #':>{w2}}",
                 "=" * (w0 + w1 + w2)]
        lines += [f"{a:<{w0}}{b:<{w1}}{c:>{w2}}" for a, b, c in rows]
        lines += ["=" * (w0 + w1 + w2), f"Total params: {total:,}", f"Trainable params: {trainable:,}",
                  f"Non-trainable params: {total - trainable:,}", rule]
        text = "\n".join(lines)
        if print_fn is not None:
            print_fn(text)
        return text

    def _output_shapes(self, input_shape):
        """Each layer's output shape (batch dimension dropped), from a lazy forward pass never computed."""
        was_training = self.training
        self.eval()
        shapes = []
        try:
            with no_grad():
                dtype = ggml.i32 if isinstance(self[0], nn.Embedding) else ggml.f32
                x = zeros((1,) + input_shape, dtype=dtype, device=self._device())
                for layer in self:
                    x = layer(x)
                    shapes.append(tuple(x.shape[1:]))
        finally:
            self.train(was_training)
        return shapes

    # ---- architecture, save, load -------------------------------------------------------------------
    def get_config(self):
        """The architecture: each layer's class and constructor arguments (JSON-able)."""
        return sequential_config(self)

    def save(self, path, include_optimizer=True):
        """Write the architecture (JSON), the weights and the compile settings to `path`, atomically.

        Load it with `Sequential.load(path)`. The optimizer's state is included when the model was
        compiled with an optimizer name (so `fit` resumes where it stopped).
        """
        blob = {"format": FORMAT, "version": VERSION, "architecture": json.dumps(self.get_config()),
                "state_dict": dict(self.state_dict())}
        if self._compiled is not None and self._compiled["config"]["optimizer"] is not None:
            blob["compile"] = json.dumps(self._compiled["config"])
            if include_optimizer:
                blob["optimizer"] = self.optimizer.state_dict()
        save_file(blob, path)

    @classmethod
    def load(cls, path, custom_objects=None, device=None):
        """A model saved by `save()`: rebuilt from its architecture, weights loaded, compiled again if it was.

        Args:
            path: the file.
            custom_objects (dict, optional): layer classes by name, for layers outside ggrad.nn.
            device (optional): where to put the parameters (default: the CPU).
        """
        blob = load_file(path, map_location=device)
        if not isinstance(blob, dict) or blob.get("format") != FORMAT:
            raise ValueError(f"Sequential.load: {path} is not a saved ggrad Sequential model")
        model = build_sequential(cls, json.loads(blob["architecture"]), custom_objects or {})
        if device is not None:
            model.to(device)
        model.load_state_dict(blob["state_dict"])
        if "compile" in blob:
            settings = json.loads(blob["compile"])
            model.compile(optimizer=settings["optimizer"], loss=settings["loss"], metrics=settings["metrics"],
                          lr=settings["lr"], clipnorm=settings["clipnorm"])
            if "optimizer" in blob:
                model.optimizer.load_state_dict(blob["optimizer"])
        return model
