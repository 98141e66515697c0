"""Where margin-MSE on the label+bm25 teacher pushes: share of positive-negative pairs whose base-encoder cosine
margin already exceeds the teacher's target margin (the loss then pulls the pair together)."""
import json, sys
import numpy as np
from syntra_dspy.training import records_from_dicts, TrainConfig
from syntra_dspy.training.teachers import Teacher
from syntra_dspy.retrieval.encoder import load_encoder

enc = load_encoder("all-MiniLM-L6-v2")
out = {}
for name, path in (("judged", sys.argv[1]), ("human", sys.argv[2])):
    rows = [json.loads(l) for l in open(path)][:300]
    data = records_from_dicts(rows)
    t = Teacher("label+bm25", scale=0.1)
    above = below = 0; base_m = []; targ_m = []; wrong_sign = 0
    for rec in data.records:
        neg = list(rec.neg[:3]); pos = rec.pos[0]
        q = enc.model.encode([rec.query], normalize_embeddings=True)
        d = enc.model.encode([pos] + neg, normalize_embeddings=True)
        cos = (d @ q[0]).tolist()
        tp, tn = t.score(rec)
        tn = tn[:3]
        for j in range(len(neg)):
            ms, mt = cos[0] - cos[1 + j], tp[0] - tn[j]
            base_m.append(ms); targ_m.append(mt)
            above += ms > mt
            wrong_sign += ms < 0
    n = len(base_m)
    out[name] = {"pairs": n, "base_margin_mean": float(np.mean(base_m)), "target_margin_mean": float(np.mean(targ_m)),
                 "share_base_margin_above_target": above / n, "share_base_orders_wrong": wrong_sign / n}
print(json.dumps(out, indent=2))
