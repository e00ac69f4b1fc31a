package dev.edgelite.android

import android.os.Bundle
import android.view.ViewGroup.LayoutParams.MATCH_PARENT
import android.view.ViewGroup.LayoutParams.WRAP_CONTENT
import android.widget.ArrayAdapter
import android.widget.Button
import android.widget.LinearLayout
import android.widget.Spinner
import android.widget.TextView
import androidx.activity.ComponentActivity
import java.io.File
import java.util.concurrent.ExecutorService
import java.util.concurrent.Executors

/**
 * The personalization screen: draw a shape, pick its label, add it; "Train" runs the spec's
 * number of training steps (20) on the phone in stock LiteRT, "Save" and "Restore" keep the
 * trained weights in a file, "Predict" runs the current weights on the drawing.
 */
class PersonalizeActivity : ComponentActivity() {
    private lateinit var model: Personalizer
    private lateinit var pad: DrawView
    private lateinit var status: TextView
    private lateinit var checkpoint: File
    private val worker: ExecutorService = Executors.newSingleThreadExecutor()

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        val spec = AppSpec.load(this)
        model = Personalizer(this, spec)
        checkpoint = File(filesDir, spec.personalization.checkpoint)
        pad = DrawView(this)
        status = TextView(this).apply { textSize = 16f; setPadding(24, 16, 24, 16) }
        val label = Spinner(this).apply {
            adapter = ArrayAdapter(context, android.R.layout.simple_spinner_dropdown_item, model.labels)
        }
        // Each button reads the pad here, on the UI thread, and acts on the worker thread.
        fun button(text: String, action: (drawing: IntArray) -> String) = Button(this).apply {
            this.text = text
            setOnClickListener {
                val drawing = pad.gray()
                inBackground { action(drawing) }
            }
        }
        fun image(drawing: IntArray) = model.preprocess(drawing, pad.size, pad.size)
        val row1 = LinearLayout(this).apply {
            addView(label)
            addView(button("Add") { drawing ->
                model.addSample(image(drawing), label.selectedItemPosition)
                runOnUiThread { pad.clear() }
                "${model.sampleCount} samples"
            })
            addView(button("Clear") { runOnUiThread { pad.clear() }; "cleared" })
        }
        val row2 = LinearLayout(this).apply {
            addView(button("Train") {
                val losses = (0 until model.steps).map { model.trainStep(it) }
                "%d steps: loss %.4f -> %.4f".format(losses.size, losses.first(), losses.last())
            })
            addView(button("Save") { model.save(checkpoint); "saved ${checkpoint.length()} bytes" })
            addView(button("Restore") {
                if (!checkpoint.exists()) "nothing saved yet" else {
                    model.restore(checkpoint)
                    "restored"
                }
            })
            addView(button("Predict") { drawing ->
                val p = model.infer(listOf(image(drawing)))[0]
                val best = p.indices.maxByOrNull { p[it] } ?: 0
                "%s (%.2f)".format(model.labels[best], p[best])
            })
        }
        setContentView(LinearLayout(this).apply {
            orientation = LinearLayout.VERTICAL
            addView(pad, LinearLayout.LayoutParams(MATCH_PARENT, WRAP_CONTENT))
            addView(row1)
            addView(row2)
            addView(status)
        })
    }

    /** Runs on the worker thread (the interpreter is used from that thread only). */
    private fun inBackground(action: () -> String) {
        worker.execute {
            val line = try {
                action()
            } catch (e: RuntimeException) {
                "error: ${e.message}"
            }
            runOnUiThread { status.text = line }
        }
    }

    override fun onDestroy() {
        super.onDestroy()
        worker.execute { model.close() }
        worker.shutdown()
    }
}
