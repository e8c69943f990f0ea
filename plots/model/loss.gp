# plots/model/loss.gp - the trained model's loss curve (bench/py/train_model.py's log):
# bits per byte on fixed windows of the training and the held-out text
# against the training step. Not a bench.csv figure: `make train-model`
# draws it next to the checkpoint.
#   gnuplot -e "csv='notebooks_data/fortunes-model-loss.csv'; out='notebooks_data/fortunes-model-loss'" plots/model/loss.gp
#   gnuplot -c plots/model/loss.gp notebooks_data/fortunes-model-loss.csv notebooks_data/fortunes-model-loss
# writes OUT.png (and OUT.svg when svg=1). The paths are only ever file
# names (a relative one gets "./" in front: never a command or a datablock);
# nothing here starts a command.
if (!exists("csv")) { csv = ARGC >= 1 ? ARG1 : "notebooks_data/fortunes-model-loss.csv" }
if (!exists("out")) { out = ARGC >= 2 ? ARG2 : "notebooks_data/fortunes-model-loss" }
if (!exists("svg")) svg = 0
kvpath(p) = p[1:1] eq "/" ? p : "./" . p
CSV = kvpath(csv)
OUT = kvpath(out)
set datafile separator comma
set datafile commentschars "#"
set grid lw 0.5 lc rgb "#cccccc"
set border lw 1
set key inside top right box opaque samplen 2 font ",15"
set title "kvlab's fortunes model: loss during training\n{/*0.7 mean over fixed 512-byte windows of each split}"
set xlabel "training step"
set ylabel "bits per byte"
set xrange [0:*]
set yrange [0:*]
fmts = svg ? "png svg" : "png"
do for [fmt in fmts] {
    if (fmt eq "png") {
        set terminal pngcairo size 1280,800 enhanced font "DejaVu Sans,17" linewidth 2
    } else {
        set terminal svg size 1280,800 enhanced font "DejaVu Sans,17" linewidth 2 background "#ffffff"
    }
    set output OUT . "." . fmt
    plot CSV using "step":"train_bpb" with linespoints lw 2 pt 7 ps 1.0 lc rgb "#1f77b4" title "training text", \
         CSV using "step":"heldout_bpb" with linespoints lw 2 pt 5 ps 1.0 lc rgb "#d62728" title "held-out text"
    unset output
}
