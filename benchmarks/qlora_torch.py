"""The PyTorch side of bench_qlora.py: transformers' LlamaForCausalLM + peft LoRA, one training step timed.

Run by bench_qlora.py in a child process that loads no GGML (PyTorch's CUDA libraries and a CUDA build of GGML
in one process abort). The weights (float32, transformers' names and layout) and the adapters' first lora_A
come from the .npz bench_qlora.py wrote; the batches are its ggrad side's (qlora_data.py).

    python benchmarks/qlora_torch.py JSON    # {"weights", "config", "device", "precision", ...}: see bench_qlora
"""

import json
import sys
import time

import numpy as np
import torch
import transformers
import peft

from qlora_data import HF_OF, batches, peak_rss


def hf_model(c, weights, device, dtype):
    config = transformers.LlamaConfig(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], num_hidden_layers=c["num_layers"],
        num_attention_heads=c["num_heads"], num_key_value_heads=c["num_kv_heads"],
        intermediate_size=c["intermediate_size"], max_position_embeddings=c["context"], rms_norm_eps=1e-5,
        tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"})
    config._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    state = {k: torch.from_numpy(weights[k]) for k in weights.files if not k.startswith("lora.")}
    model.load_state_dict(state, assign=True, strict=True)
    model.model.rotary_emb = type(model.model.rotary_emb)(config)   # its inv_freq buffer was made on meta
    return model.to(device=device, dtype=dtype)


def main(args):
    torch.set_num_threads(args["threads"])
    c = args["config"]
    device = torch.device(args["device"])
    bf16 = args["precision"] == "bf16"
    weights = np.load(args["weights"])
    model = hf_model(c, weights, device, torch.bfloat16 if bf16 else torch.float32)
    lora = peft.LoraConfig(r=args["r"], lora_alpha=args["alpha"], lora_dropout=0.0,
                           target_modules=[HF_OF[t].split(".")[-1] for t in args["targets"]])
    model = peft.get_peft_model(model, lora)   # adapters in float32 (peft's autocast_adapter_dtype)
    with torch.no_grad():
        for i in range(c["num_layers"]):
            for ours in args["targets"]:
                layer = model.base_model.model.model.layers[i].get_submodule(HF_OF[ours])
                layer.lora_A["default"].weight.copy_(torch.from_numpy(weights[f"lora.blk.{i}.{ours}"]))
    if args["checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args["lr"], weight_decay=0.0)
    cuda = device.type == "cuda"
    losses, times = [], []
    for window in batches(c["vocab_size"], args["batch"], args["seq"], args["warmup"] + args["steps"]):
        ids = torch.from_numpy(window).to(device)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=ids[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, c["vocab_size"]), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())   # waits for the device
        times.append(time.perf_counter() - t0)
    if cuda:
        peak = torch.cuda.max_memory_allocated(device)
    else:
        peak = peak_rss()
    print(json.dumps({"times": times[args["warmup"]:], "losses": losses, "peak": peak,
                      "versions": f"torch {torch.__version__}, transformers {transformers.__version__}, "
                                  f"peft {peft.__version__}"}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
