package dev.edgelite.android

import android.Manifest
import android.content.Intent
import android.content.pm.PackageManager
import android.graphics.Bitmap
import android.graphics.Matrix
import android.os.Bundle
import android.os.SystemClock
import android.view.ViewGroup.LayoutParams.MATCH_PARENT
import android.view.ViewGroup.LayoutParams.WRAP_CONTENT
import android.widget.Button
import android.widget.LinearLayout
import android.widget.TextView
import androidx.activity.ComponentActivity
import androidx.activity.result.contract.ActivityResultContracts
import androidx.camera.core.CameraSelector
import androidx.camera.core.ImageAnalysis
import androidx.camera.core.ImageProxy
import androidx.camera.core.Preview
import androidx.camera.lifecycle.ProcessCameraProvider
import androidx.camera.view.PreviewView
import androidx.core.content.ContextCompat
import java.util.concurrent.ExecutorService
import java.util.concurrent.Executors

/**
 * The camera screen: CameraX frames -> a band across the middle (where the user holds a line
 * of text) -> the text-direction model on stock LiteRT -> "0°" or "180°" and the latency.
 */
class MainActivity : ComponentActivity() {
    private lateinit var preview: PreviewView
    private lateinit var result: TextView
    private lateinit var classifier: TextDirection
    private val analysis: ExecutorService = Executors.newSingleThreadExecutor()

    private val askCamera =
        registerForActivityResult(ActivityResultContracts.RequestPermission()) { granted ->
            if (granted) startCamera() else result.text = "the camera permission was denied"
        }

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        classifier = TextDirection(this, AppSpec.load(this))
        preview = PreviewView(this)
        result = TextView(this).apply {
            textSize = 20f
            setPadding(32, 24, 32, 24)
            text = "hold a line of text across the middle of the picture"
        }
        val personalize = Button(this).apply {
            text = "Personalize (train on the phone)"
            setOnClickListener {
                startActivity(Intent(this@MainActivity, PersonalizeActivity::class.java))
            }
        }
        setContentView(LinearLayout(this).apply {
            orientation = LinearLayout.VERTICAL
            addView(preview, LinearLayout.LayoutParams(MATCH_PARENT, 0, 1f))
            addView(result, LinearLayout.LayoutParams(MATCH_PARENT, WRAP_CONTENT))
            addView(personalize, LinearLayout.LayoutParams(MATCH_PARENT, WRAP_CONTENT))
        })
        val permission = ContextCompat.checkSelfPermission(this, Manifest.permission.CAMERA)
        if (permission == PackageManager.PERMISSION_GRANTED) startCamera()
        else askCamera.launch(Manifest.permission.CAMERA)
    }

    private fun startCamera() {
        val future = ProcessCameraProvider.getInstance(this)
        future.addListener({
            val provider = future.get()
            val shown = Preview.Builder().build()
            shown.setSurfaceProvider(preview.surfaceProvider)
            val frames = ImageAnalysis.Builder()
                .setBackpressureStrategy(ImageAnalysis.STRATEGY_KEEP_ONLY_LATEST)
                .setOutputImageFormat(ImageAnalysis.OUTPUT_IMAGE_FORMAT_RGBA_8888)
                .build()
            frames.setAnalyzer(analysis) { frame -> analyze(frame) }
            provider.unbindAll()
            provider.bindToLifecycle(this, CameraSelector.DEFAULT_BACK_CAMERA, shown, frames)
        }, ContextCompat.getMainExecutor(this))
    }

    private fun analyze(frame: ImageProxy) {
        val upright = frame.use { upright(it.toBitmap(), it.imageInfo.rotationDegrees) }
        val start = SystemClock.elapsedRealtime()
        val (label, scores) = classifier.classify(band(upright))
        val ms = SystemClock.elapsedRealtime() - start
        val line = "text direction: $label° (score %.2f), %d ms".format(scores.max(), ms)
        runOnUiThread { result.text = line }
    }

    /** The frame as the user sees it. */
    private fun upright(bitmap: Bitmap, degrees: Int): Bitmap {
        if (degrees == 0) return bitmap
        val turn = Matrix().apply { postRotate(degrees.toFloat()) }
        return Bitmap.createBitmap(bitmap, 0, 0, bitmap.width, bitmap.height, turn, true)
    }

    /** A band across the middle, 4 times as wide as high (the model's 192 x 48). */
    private fun band(bitmap: Bitmap): Bitmap {
        val h = minOf(bitmap.height, bitmap.width / 4)
        return Bitmap.createBitmap(bitmap, 0, (bitmap.height - h) / 2, bitmap.width, h)
    }

    override fun onDestroy() {
        super.onDestroy()
        analysis.execute { classifier.close() }
        analysis.shutdown()
    }
}
