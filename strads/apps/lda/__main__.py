"""python -m strads.apps.lda [--data FILE] [flags]; see --help."""

from ... import cli, engine
from . import LDAUpdate, corpus_source, file_source, make_setup, top_words
from .data import FORMATS, check_corpus_size
from .schedule import SCHEDULES

MODULE = "strads.apps.lda"


def build_parser():
    p = cli.parser(MODULE, "LDA topic model by collapsed Gibbs sampling, model-parallel "
                   "with rotating vocabulary slices (STRADS). --data reads UCI bag-of-words "
                   "(docword.*.txt + vocab.*.txt), LDA-C (*.ldac: 'N id:count ...') or plain "
                   "text (one document per line).", max_rounds=10 ** 9, tol=0.0)
    a = p.add_argument_group("lda")
    a.add_argument("--topics", type=cli.pos_int, default=10, help="number of topics K")
    a.add_argument("--alpha", type=cli.pos_float, default=0.1,
                   help="symmetric Dirichlet prior of the document-topic distributions")
    a.add_argument("--beta", type=cli.pos_float, default=0.01,
                   help="symmetric Dirichlet prior of the topic-word distributions")
    a.add_argument("--sweeps", type=cli.nonneg_int, default=50,
                   help="passes over the corpus (model schedule: one sweep is "
                        "workers x (staleness + 1) rounds)")
    a.add_argument("--schedule", choices=sorted(SCHEDULES), default="model",
                   help="model: STRADS vocabulary rotation; data: YahooLDA-style "
                        "data-parallel baseline")
    a.add_argument("--top-words", type=cli.nonneg_int, default=10, metavar="N",
                   help="print the N top words of each topic at the end (0: none)")
    a.add_argument("--format", choices=FORMATS, default="auto",
                   help="--data format; auto: docword.* is UCI, *.ldac LDA-C, else text")
    a.add_argument("--vocab", metavar="PATH",
                   help="vocabulary (one word per line) for UCI/LDA-C data; default: "
                        "vocab.<name>.txt, <stem>.tokens or <stem>.vocab beside --data")
    a.add_argument("--min-count", type=cli.pos_int, default=2,
                   help="text data: drop words seen fewer times in the whole corpus")
    g = p.add_argument_group("built-in corpus (no --data), drawn from the LDA model")
    g.add_argument("--n-docs", type=cli.pos_int, default=1000, help="documents")
    g.add_argument("--n-words", type=cli.pos_int, default=1000, help="vocabulary size")
    g.add_argument("--doc-length", type=cli.pos_int, default=100, help="mean tokens per doc")
    g.add_argument("--true-topics", type=cli.pos_int, default=None,
                   help="topics of the generating model; none: --topics")
    g.add_argument("--true-beta", type=cli.pos_float, default=0.05,
                   help="Dirichlet prior the true topics are drawn from")
    return p


def run(args):
    true_topics = args.true_topics or args.topics
    # the workers read the file or draw the built-in corpus themselves: rank 0 holds
    # nothing of it
    if args.data:
        data = file_source(args.data, args.format, args.vocab, args.min_count)
    else:
        data = corpus_source(args.n_docs, args.n_words, args.doc_length, true_topics,
                             args.alpha, args.true_beta, args.seed)
    # the flags first (one line each), then the built-in corpus's size before it is drawn
    setup = make_setup(data, args.topics, args.alpha, args.beta, args.schedule, args.sweeps,
                       args.seed, cli=True)
    if not args.data:
        check_corpus_size(args.n_docs, args.n_words, args.doc_length, true_topics, {
            "n_docs": "--n-docs", "n_words": "--n-words", "doc_length": "--doc-length",
            "n_topics": "--true-topics" if args.true_topics else "--topics"})
    return engine.run(setup, LDAUpdate, app="lda", **cli.engine_kwargs(args))


def main(argv=None):
    args = build_parser().parse_args(argv)
    result = cli.main(MODULE, run, args)
    if result is not None and args.top_words:
        vocab = result.model.get("vocab")
        wt = result.model["word_topic"]
        share = wt.sum(axis=0) / max(1, wt.sum())
        for k, words in enumerate(top_words(wt, vocab, args.top_words)):
            print(f"topic {k:3d} ({100 * share[k]:4.1f}%): {' '.join(words)}")
    return result


if __name__ == "__main__":
    main()
