
decoder-blockvexamples/decoder-block.json (hand-written: one GPT-J-style decoder block at batch 1, hidden 256, 4 heads, seq 64, f32)	€"%x€€0"@w_qkv€"%qkv€€"%k_cache€"%scores"%max€"%probs€€"@w_out€"	%attn_out	€€@"@w_up
€ "%h€"%y"1qkv.filllinalg.fill(€0€B€R€f32  ("]
qkv.matveclinalg.matvec (€0€€B€J€R€€0f32  (R€f32  (R€f32  ("\scoreslinalg.matvec (€0€€8B€J@R€€f32  (R€f32  (R€f32  ("Lsoftmax.maxlinalg.generic (0€BJ€R€f32  (Rf32  ("Zsoftmax.explinalg.generic (€0€B€R€f32  (Rf32  (R€f32  ("_
out.matveclinalg.matvec (€0€€B€J€R€€f32  (R€f32  (R€f32  ("^	up.matveclinalg.matvec (€0€€B€J€R	€€@f32  (R€f32  (R
€ f32  ("4gelulinalg.generic (€0€B€R
€ f32  ("Zresidual.addlinalg.generic (€0€B€R€f32  (R€f32  (R€f32  (